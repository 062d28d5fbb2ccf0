"""gunicorn settings for the platform's server, started by deploy/serve:
`gunicorn -c deploy/gunicorn.conf.py platform_site.asgi:application`.

gunicorn manages the processes; each runs an asyncio event loop (uvicorn, through
platform_site.worker.Worker) that reads requests, holds waiting long polls, and hands requests to
Django in GUNICORN_THREADS threads (platform_site/server.py; docs/deployment.md, "The server").

Every value can be set from the environment (GUNICORN_*). With PROMETHEUS_MULTIPROC_DIR set, each
worker writes its metrics there; the directory is emptied when the master starts and a dead
worker's live gauges are dropped, so /actuator/prometheus adds up the workers alive now.
"""

import multiprocessing
import os
from pathlib import Path
from typing import Any

from prometheus_client import multiprocess

bind = os.environ.get("GUNICORN_BIND", "0.0.0.0:8000")
workers = int(os.environ.get("GUNICORN_WORKERS", str(max(2, multiprocessing.cpu_count()))))
worker_class = "platform_site.worker.Worker"
# How long a worker may stay silent before the master replaces it. Its event loop answers the
# master's heartbeat while requests wait, so long polls (20 s at most) do not count here.
timeout = int(os.environ.get("GUNICORN_TIMEOUT", "60"))
# A stopping worker (a deploy, a scale-down) stops accepting and lets its requests finish: above
# the longest long poll (20 s) with room for its last answer.
graceful_timeout = int(os.environ.get("GUNICORN_GRACEFUL_TIMEOUT", "30"))
keepalive = 5
# nginx logs every request; the application logs one JSON line per request itself.
accesslog = None
errorlog = "-"
loglevel = os.environ.get("LOG_LEVEL", "info").lower()


def on_starting(server: Any) -> None:
    directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if directory:
        path = Path(directory)
        path.mkdir(parents=True, exist_ok=True)
        # A previous run's files would add dead workers' counts to this run's.
        for stale in path.glob("*.db"):
            stale.unlink()


def child_exit(server: Any, worker: Any) -> None:
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        multiprocess.mark_process_dead(worker.pid)  # type: ignore[no-untyped-call]
