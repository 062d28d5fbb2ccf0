"""ASGI entry point (deploy/serve, `make run`): the platform's server (platform_site/server.py),
with the exchange's listener started on each process's event loop. It never starts the embedded
PostgreSQL: set DATABASE_URL (manage.py and the Makefile do)."""

from __future__ import annotations

import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "platform_site.settings")
django.setup(set_prefix=False)

# After django.setup(): the server builds Django's handler, the listener reads the settings.
from exchange.wakeups import wakeups  # noqa: E402
from platform_site.server import Server  # noqa: E402
from platform_site.server import application as server  # noqa: E402


def serve(*, threads: int, static: bool | None = None) -> Server:
    """The platform's ASGI application: Django in ``threads`` threads per process."""
    return server(threads=threads, static=static, on_startup=[wakeups.start])


# Threads that run Django in each process (GUNICORN_THREADS, as the threaded server had).
application = serve(threads=int(os.environ.get("GUNICORN_THREADS", "8")))
