"""The gunicorn worker of deploy/serve (deploy/gunicorn.conf.py names it), and the uvicorn server
that `make run` and the tests' live server run too."""

from __future__ import annotations

import socket
from typing import Any, ClassVar

import uvicorn
from uvicorn_worker import UvicornWorker

from platform_site.internals import uvicorn_worker_serve


class Server(uvicorn.Server):
    """uvicorn's server, which tells the application that the process stops before it waits for
    the connections to end: deferred requests answer what they have, and push streams send their
    ``end SHUTDOWN`` and finish, instead of holding the stop up to the graceful timeout."""

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        # Imported here: gunicorn's arbiter loads this module before Django is set up.
        from platform_site.server import stop_serving

        stop_serving()
        await super().shutdown(sockets)


class Worker(UvicornWorker):  # type: ignore[misc]  # untyped
    """gunicorn's worker for deploy/serve: one uvicorn event loop (uvloop, httptools) per
    process. The platform reads X-Forwarded-For itself (TRUSTED_PROXIES) and names no server; a
    stopping worker ends its streams and answers its long polls (Server above), and lets its
    other requests finish within graceful_timeout."""

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

    async def _serve(self) -> None:
        # uvicorn_worker's private method, run with the Server above (platform_site.internals).
        await uvicorn_worker_serve(self, Server)
