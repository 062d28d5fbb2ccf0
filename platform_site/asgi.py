"""ASGI entry point (deploy/serve, `make run`): the platform's server (platform_site/server.py).
As each process's event loop starts, every app whose AppConfig has a ``serving()`` method is told
(the exchange starts its listener there). It never starts the embedded PostgreSQL: set DATABASE_URL
(manage.py and the Makefile do)."""

from __future__ import annotations

import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "platform_site.settings")
django.setup(set_prefix=False)

# After django.setup(): the server builds Django's handler.
from django.apps import apps  # noqa: E402

from platform_site.server import Server  # noqa: E402
from platform_site.server import application as server  # noqa: E402


def serving() -> None:
    """On the event loop, before the first request: each app that has something to start there."""
    for config in apps.get_app_configs():
        start = getattr(config, "serving", None)
        if start is not None:
            start()


def serve(*, threads: int, static: bool | None = None) -> Server:
    """The platform's ASGI application: Django in ``threads`` threads per process."""
    return server(threads=threads, static=static, on_startup=[serving])


# Threads that run Django in each process (GUNICORN_THREADS, as the threaded server had).
application = serve(threads=int(os.environ.get("GUNICORN_THREADS", "8")))
