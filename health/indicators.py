"""Spring Boot's health indicators, reproduced: db, diskSpace, ping and (when enabled) redis, and
their aggregation."""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import psycopg
import redis
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections
from django.db.migrations.executor import MigrationExecutor
from redis.exceptions import RedisError

from platform_site.cache import availability as redis_availability
from platform_site.database import direct_connect
from platform_site.db.availability import availability

logger = logging.getLogger(__name__)

DB_DETAILS = {"database": "PostgreSQL", "validationQuery": "isValid()"}
UP = "UP"
DOWN = "DOWN"
OUT_OF_SERVICE = "OUT_OF_SERVICE"
UNKNOWN = "UNKNOWN"
# SimpleStatusAggregator's order: the first status present wins.
_SEVERITY = (DOWN, OUT_OF_SERVICE, UP, UNKNOWN)


@dataclass(frozen=True)
class Health:
    status: str
    details: dict[str, Any] | None = None

    def as_json(self) -> dict[str, Any]:
        if self.details is None:
            return {"status": self.status}
        return {"status": self.status, "details": self.details}

    @property
    def http_status(self) -> int:
        return 503 if self.status in {DOWN, OUT_OF_SERVICE} else 200


def aggregate(statuses: list[str]) -> str:
    return next((status for status in _SEVERITY if status in statuses), UNKNOWN)


def db_health() -> Health:
    """A fresh connection and ``SELECT 1``, bounded by MANAGEMENT_HEALTH_DB_TIMEOUT_SECONDS.

    It deliberately bypasses the connection pool: a pool waits its whole timeout for a server
    that is gone, while a direct connection fails at once with the reason (refused, no socket).
    The reason goes to the log only: health is public, and the error names hosts and socket
    paths.
    """
    try:
        with direct_connect(connect_timeout=settings.MANAGEMENT_HEALTH_DB_TIMEOUT_SECONDS) as raw:
            raw.execute("SELECT 1").fetchone()
    except psycopg.Error as exception:
        logger.warning("Health: the database is DOWN: %s: %s", type(exception).__name__, exception)
        availability.observed(answers=False)
        return Health(DOWN, DB_DETAILS)
    availability.observed(answers=True)
    return Health(UP, DB_DETAILS)


def disk_space_health() -> Health:
    configured = settings.MANAGEMENT_HEALTH_DISKSPACE_PATH
    # java.io.File.getAbsolutePath() joins without normalising: "." prints as "/cwd/.".
    path = configured if os.path.isabs(configured) else os.path.join(os.getcwd(), configured)
    threshold = settings.MANAGEMENT_HEALTH_DISKSPACE_THRESHOLD_BYTES
    try:
        usage = shutil.disk_usage(path)
    except OSError:
        return Health(
            DOWN, {"total": 0, "free": 0, "threshold": threshold, "path": path, "exists": False}
        )
    status = UP if usage.free >= threshold else DOWN
    return Health(
        status,
        {
            "total": usage.total,
            "free": usage.free,
            "threshold": threshold,
            "path": path,
            "exists": True,
        },
    )


def ping_health() -> Health:
    return Health(UP)


def redis_health() -> Health:
    """Spring's RedisHealthIndicator: PING on a connection of its own, and the server's version.

    Like db_health it asks the server itself, whether or not this process left Redis aside
    (platform_site.cache), and its answer counts for the process: a Redis that answers again is
    used again at once. The call is bounded by REDIS_SOCKET_TIMEOUT_SECONDS; the reason of a
    failure goes to the log only.
    """
    if not settings.REDIS_URL:
        return Health(DOWN, {"error": "REDIS_URL is not set"})
    timeout = settings.REDIS_SOCKET_TIMEOUT_SECONDS
    client = redis.Redis.from_url(
        settings.REDIS_URL, socket_timeout=timeout, socket_connect_timeout=timeout
    )
    try:
        client.ping()
        version = client.info("server").get("redis_version", "unknown")
    except RedisError as error:
        logger.warning("Health: Redis is DOWN: %s: %s", type(error).__name__, error)
        redis_availability.failed(error)
        return Health(DOWN, {"error": type(error).__name__})
    finally:
        client.close()
    redis_availability.answered()
    return Health(UP, {"version": version})


def indicators() -> dict[str, Callable[[], Health]]:
    """The components of /actuator/health: db, diskSpace and ping, and redis only with
    MANAGEMENT_HEALTH_REDIS_ENABLED (off by default: docs/operations.md, "Health")."""
    found: dict[str, Callable[[], Health]] = {
        "db": db_health,
        "diskSpace": disk_space_health,
        "ping": ping_health,
    }
    if settings.MANAGEMENT_HEALTH_REDIS_ENABLED:
        found["redis"] = redis_health
    return found


_migrations_applied = False


def migrations_applied() -> bool:
    """True once no migration is left to apply; a process's code cannot gain new ones later."""
    global _migrations_applied
    if not _migrations_applied:
        executor = MigrationExecutor(connections[DEFAULT_DB_ALIAS])
        _migrations_applied = not executor.migration_plan(executor.loader.graph.leaf_nodes())
    return _migrations_applied


def readiness() -> Health:
    if db_health().status != UP:
        return Health(DOWN)
    try:
        applied = migrations_applied()
    except DatabaseError:
        applied = False
    return Health(UP if applied else DOWN)
