"""The gunicorn worker of deploy/serve (deploy/gunicorn.conf.py names it)."""

from __future__ import annotations

from typing import Any, ClassVar

from uvicorn_worker import UvicornWorker


class Worker(UvicornWorker):  # type: ignore[misc]  # untyped
    """gunicorn's worker for deploy/serve: one uvicorn event loop (uvloop, httptools) per
    process. The platform reads X-Forwarded-For itself (TRUSTED_PROXIES) and names no server; a
    stopping worker lets its requests finish, long polls included, within graceful_timeout."""

    CONFIG_KWARGS: ClassVar[dict[str, Any]] = {
        "loop": "uvloop",
        "http": "httptools",
        "lifespan": "on",
        "proxy_headers": False,
        "server_header": False,
    }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.config.timeout_graceful_shutdown = self.cfg.graceful_timeout
