"""Direct PostgreSQL connections beside Django's pool, for work that must not hold a pooled one."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

import psycopg
from django.db import DEFAULT_DB_ALIAS, connections

if TYPE_CHECKING:
    from django.db.backends.utils import CursorWrapper

    from platform_site.db.base import DatabaseWrapper


def direct_connect(*, alias: str = DEFAULT_DB_ALIAS, **options: Any) -> psycopg.Connection[Any]:
    """A new connection with the same address and credentials as Django's ``alias``.

    Used by the health check (a dead server must fail at once, not after the pool's timeout).
    """
    params = connections[alias].get_connection_params()
    params.pop("cursor_factory", None)  # django-prometheus' counting cursor wants Django around it
    params.update(options)
    return psycopg.connect(**params)


async def direct_connect_async(
    *, alias: str = DEFAULT_DB_ALIAS, **options: Any
) -> psycopg.AsyncConnection[Any]:
    """``direct_connect`` for an event loop: the LISTEN connection of long polling."""
    params = connections[alias].get_connection_params()
    params.pop("cursor_factory", None)
    params.update(options)
    return await psycopg.AsyncConnection.connect(**params)


def prepared_cursor(alias: str = DEFAULT_DB_ALIAS) -> CursorWrapper:
    """A cursor whose statements PostgreSQL plans once per connection (see
    platform_site.db.base.DatabaseWrapper.prepared_cursor); for the exchange's hot statements."""
    return cast("DatabaseWrapper", connections[alias]).prepared_cursor()
