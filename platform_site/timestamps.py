"""Timestamps on the wire: RFC 3339 in UTC with Z (2026-11-21T09:30:00Z)."""

from __future__ import annotations

from datetime import UTC, datetime


def rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
