"""The platform's timestamps: RFC 3339 in UTC with ``Z``."""

from __future__ import annotations

from datetime import datetime


def parse_timestamp(value: str) -> datetime:
    # datetime.fromisoformat reads "Z" only from Python 3.11 on.
    return datetime.fromisoformat(value[:-1] + "+00:00" if value.endswith("Z") else value)
