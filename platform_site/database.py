"""Direct PostgreSQL connections beside Django's pool, for work that must not hold a pooled one."""

from __future__ import annotations

from typing import Any

import psycopg
from django.db import DEFAULT_DB_ALIAS, connections


def direct_connect(*, alias: str = DEFAULT_DB_ALIAS, **options: Any) -> psycopg.Connection[Any]:
    """A new connection with the same address and credentials as Django's ``alias``.

    Used by the health check (a dead server must fail at once, not after the pool's timeout) and
    by the LISTEN connection of long polling (it waits for hours).
    """
    params = connections[alias].get_connection_params()
    params.pop("cursor_factory", None)  # django-prometheus' counting cursor wants Django around it
    params.update(options)
    return psycopg.connect(**params)
