"""Timestamps on the wire: RFC 3339 in UTC with Z (2026-11-21T09:30:00Z); and for people, in the
cabinet's pages and sentences: 2026-11-21 09:30 UTC."""

from __future__ import annotations

from datetime import UTC, datetime


def rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def utc_display(moment: datetime) -> str:
    """One format for people in every language, in UTC and saying so: the cabinet serves people
    in every time zone, and a time without its zone is a time misread."""
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
