"""gunicorn settings for the platform: `gunicorn -c deploy/gunicorn.conf.py platform_site.wsgi`.

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
# Threaded workers (gthread): a long poll waits in a thread (holding no database connection)
# while the worker's other threads serve sends and ACKs. EXCHANGE_LONG_POLL_MAX_WAITING keeps
# some threads free.
threads = int(os.environ.get("GUNICORN_THREADS", "8"))
worker_class = "gthread"
# Above the exchange API's longest long poll (20 s), with room for a slow database.
timeout = int(os.environ.get("GUNICORN_TIMEOUT", "60"))
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
