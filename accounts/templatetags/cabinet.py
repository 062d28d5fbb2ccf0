"""The cabinet's template filters: ``{% load cabinet %}``."""

from __future__ import annotations

from datetime import datetime

from django import template

from platform_site.timestamps import utc_display

register = template.Library()


@register.filter
def utc(moment: datetime | None) -> str:
    """Every moment a cabinet page shows: ``2026-11-24 20:11 UTC`` (empty for none)."""
    return "" if moment is None else utc_display(moment)
