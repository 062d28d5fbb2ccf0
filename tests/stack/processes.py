"""Starting and stopping the stack's own processes: gunicorn with an environment of the test's
choosing, and a Celery worker; every process is ended when its context exits."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path

import httpx

from tests.stack.conftest import ROOT, Gunicorn, StackDatabase, free_port, wait_until

# Stack variables that CI exports for the whole suite: a started process sees only what its test
# sets, so a test's Redis database or broker never leaks into another's.
SHARED_SERVICES = ("REDIS_URL", "CELERY_BROKER_URL", "CELERY_QUEUE", "EMAIL_URL", "SMS_BACKEND")


def base_env(database: StackDatabase, overrides: Mapping[str, str]) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key not in SHARED_SERVICES}
    env.update(
        {
            "DATABASE_URL": database.url,
            "ALLOWED_HOSTS": "127.0.0.1",
            "DEBUG": "false",
            "LOG_LEVEL": "INFO",
            "PYTHONUNBUFFERED": "1",
        }
    )
    env.update(overrides)
    return env


def stop(process: subprocess.Popen[bytes], *, timeout: float = 20) -> None:
    """SIGTERM, then SIGKILL for the process and its group (it was started in a group of its own)."""
    if process.poll() is None:
        process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        with suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)
    # Children the leader left behind (a worker's embedded beat, a gunicorn worker).
    with suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)


@contextmanager
def running_gunicorn(
    database: StackDatabase, workdir: Path, env: Mapping[str, str], *, workers: int = 2
) -> Iterator[Gunicorn]:
    """gunicorn over ``database`` with ``env`` on top of the stack's defaults, ready to serve."""
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    server = Gunicorn(
        base_url=f"http://127.0.0.1:{port}",
        log=workdir / "gunicorn.log",
        metrics_dir=workdir / "prometheus",
    )
    full_env = base_env(
        database,
        {
            "PROMETHEUS_MULTIPROC_DIR": str(server.metrics_dir),
            "GUNICORN_BIND": f"127.0.0.1:{port}",
            "GUNICORN_WORKERS": str(workers),
            **env,
        },
    )
    with server.log.open("wb") as log:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gunicorn",
                "-c",
                "deploy/gunicorn.conf.py",
                "platform_site.wsgi",
            ],
            cwd=ROOT,
            env=full_env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:

        def ready() -> bool:
            assert process.poll() is None, server.log.read_text()
            try:
                url = f"{server.base_url}/api/actuator/health/readiness"
                return httpx.get(url).status_code == 200
            except httpx.TransportError:
                return False

        wait_until(ready, timeout=60, what="gunicorn to become ready")
        yield server
    finally:
        stop(process, timeout=30)


@contextmanager
def running_celery_worker(
    database: StackDatabase, workdir: Path, env: Mapping[str, str], *, queue: str
) -> Iterator[subprocess.Popen[bytes]]:
    """A Celery worker consuming ``queue`` alone, with beat embedded (-B), ready to consume."""
    workdir.mkdir(parents=True, exist_ok=True)
    log_path = workdir / "celery.log"
    full_env = base_env(database, {"CELERY_QUEUE": queue, **env})
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "platform_site",
                "worker",
                "--pool=solo",
                "--concurrency=1",
                "-Q",
                queue,
                "-n",
                f"{queue}@%h",
                "--without-mingle",
                "--without-gossip",
                "-B",
                # Not celerybeat-schedule in the checkout.
                "-s",
                str(workdir / "beat-schedule"),
                "--loglevel=INFO",
            ],
            cwd=ROOT,
            env=full_env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:

        def ready() -> bool:
            assert process.poll() is None, log_path.read_text()
            return " ready." in log_path.read_text()

        wait_until(ready, timeout=60, what="the Celery worker to become ready")
        yield process
    finally:
        stop(process, timeout=30)
