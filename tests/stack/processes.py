"""Starting and stopping the stack's own processes: the platform's server (deploy/serve) with an
environment of the test's choosing, a Celery worker and beat, and nginx with deploy/nginx's
configuration; every process is ended when its context exits."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import httpx

from platform_site.embedded import free_port
from tests.stack.conftest import ROOT, Gunicorn, StackDatabase, wait_until

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
def running(
    command: list[str],
    *,
    log_path: Path,
    ready: Callable[[], bool],
    what: str,
    env: Mapping[str, str] | None = None,
    cwd: Path = ROOT,
    timeout: float = 60,
    stop_timeout: float = 30,
) -> Iterator[subprocess.Popen[bytes]]:
    """``command`` in a process group of its own, its output in ``log_path``, until ``ready``."""
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            command,
            cwd=cwd,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:

        def started() -> bool:
            assert process.poll() is None, log_path.read_text()
            return ready()

        wait_until(started, timeout=timeout, what=what)
        yield process
    finally:
        stop(process, timeout=stop_timeout)


def answers_200(url: str) -> bool:
    try:
        return httpx.get(url).status_code == 200
    except httpx.TransportError:
        return False


@contextmanager
def running_gunicorn(
    database: StackDatabase,
    workdir: Path,
    env: Mapping[str, str],
    *,
    workers: int = 2,
    host: str = "127.0.0.1",
    launcher: Sequence[str] = (),
) -> Iterator[Gunicorn]:
    """The platform's server (deploy/serve: gunicorn's processes, each an event loop in front of
    Django) over ``database`` with ``env`` on top of the stack's defaults, ready to serve; on
    ``host``, started through ``launcher`` (another host's: tests/stack/hosts.py)."""
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    server = Gunicorn(
        base_url=f"http://{host}:{port}",
        log=workdir / "gunicorn.log",
        metrics_dir=workdir / "prometheus",
    )
    full_env = base_env(
        database,
        {
            "PROMETHEUS_MULTIPROC_DIR": str(server.metrics_dir),
            "GUNICORN_BIND": f"{host}:{port}",
            "GUNICORN_WORKERS": str(workers),
            **env,
        },
    )
    full_env["PYTHON"] = sys.executable  # deploy/serve's interpreter: this virtualenv's
    command = [*launcher, str(ROOT / "deploy" / "serve")]
    with running(
        command,
        log_path=server.log,
        env=full_env,
        ready=lambda: answers_200(f"{server.base_url}/api/actuator/health/readiness"),
        what="gunicorn to become ready",
    ) as process:
        server.pid = process.pid
        yield server


@contextmanager
def running_celery_worker(
    database: StackDatabase,
    workdir: Path,
    env: Mapping[str, str],
    *,
    queue: str,
    embedded_beat: bool = True,
    node: str | None = None,
    launcher: Sequence[str] = (),
) -> Iterator[subprocess.Popen[bytes]]:
    """A Celery worker consuming ``queue`` alone, ready to consume; with beat embedded (-B) unless
    ``embedded_beat`` is false (then run ``running_celery_beat`` beside it, as deployed); named
    ``node`` (else after the queue), started through ``launcher``."""
    workdir.mkdir(parents=True, exist_ok=True)
    log_path = workdir / "celery.log"
    full_env = base_env(database, {"CELERY_QUEUE": queue, **env})
    # Not celerybeat-schedule in the checkout.
    beat = ["-B", "-s", str(workdir / "beat-schedule")] if embedded_beat else []
    command = [
        *launcher,
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
        f"{node or queue}@%h",
        "--without-mingle",
        "--without-gossip",
        *beat,
        "--loglevel=INFO",
    ]
    with running(
        command,
        log_path=log_path,
        env=full_env,
        ready=lambda: " ready." in log_path.read_text(),
        what="the Celery worker to become ready",
    ) as process:
        yield process


@contextmanager
def running_celery_beat(
    database: StackDatabase, workdir: Path, env: Mapping[str, str], *, queue: str
) -> Iterator[subprocess.Popen[bytes]]:
    """Celery beat on its own (the compose file's ``beat`` service), scheduling into ``queue``."""
    workdir.mkdir(parents=True, exist_ok=True)
    log_path = workdir / "beat.log"
    full_env = base_env(database, {"CELERY_QUEUE": queue, **env})
    command = [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "platform_site",
        "beat",
        "-s",
        str(workdir / "beat-schedule"),
        "--loglevel=INFO",
    ]
    with running(
        command,
        log_path=log_path,
        env=full_env,
        ready=lambda: "beat: Starting..." in log_path.read_text(),
        what="Celery beat to start",
    ) as process:
        yield process


NGINX_TEMPLATE_VARIABLES = (
    "NGINX_PORT",
    "BACKEND",
    "STATIC_ROOT",
    "ACCESS_LOG",
    "CLIENT_MAX_BODY_SIZE",
    "CLIENT_MAX_BATCH_BODY_SIZE",
    "FORWARDED_PROTO",
)


@dataclass
class Nginx:
    base_url: str
    access_log: Path
    error_log: Path
    prefix: Path


def render_nginx(prefix: Path, variables: Mapping[str, str]) -> Path:
    """deploy/nginx as the container has it: nginx.conf and mime.types in ``prefix``, the server
    block rendered from its template into conf.d/ the way envsubst does (only the template's own
    variables: nginx's $host, $request_id... stay). Returns the main configuration file."""
    assert set(variables) == set(NGINX_TEMPLATE_VARIABLES), variables
    (prefix / "conf.d").mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "deploy/nginx/nginx.conf", prefix / "nginx.conf")
    shutil.copy("/etc/nginx/mime.types", prefix / "mime.types")
    template = (ROOT / "deploy/nginx/templates/platform.conf.template").read_text()
    names = "|".join(NGINX_TEMPLATE_VARIABLES)
    rendered = re.sub(
        rf"\$(?:\{{({names})\}}|({names})\b)",
        lambda match: variables[match.group(1) or match.group(2)],
        template,
    )
    (prefix / "conf.d/platform.conf").write_text(rendered)
    return prefix / "nginx.conf"


@contextmanager
def running_nginx(
    workdir: Path,
    *,
    backend: str,
    static_root: Path,
    client_max_body_size: str = "1m",
    more_backends: Sequence[str] = (),
    server_options: str = "",
) -> Iterator[Nginx]:
    """Debian's nginx with deploy/nginx's configuration on a loopback port, in front of
    ``backend`` (host:port) and ``more_backends``, each a ``server`` of the upstream block with
    ``server_options`` (e.g. nginx's passive health checks: max_fails, fail_timeout), serving
    ``static_root``; ready to answer /healthz."""
    prefix = workdir / "nginx"
    port = free_port()
    server = Nginx(
        base_url=f"http://127.0.0.1:{port}",
        access_log=prefix / "access.log",
        error_log=prefix / "error.log",
        prefix=prefix,
    )
    config = render_nginx(
        prefix,
        {
            "NGINX_PORT": f"127.0.0.1:{port}",
            # The template's upstream block names one server: the others are lines of it.
            "BACKEND": ";\n    server ".join(
                f"{address} {server_options}".strip() for address in (backend, *more_backends)
            ),
            "STATIC_ROOT": str(static_root),
            "ACCESS_LOG": str(server.access_log),
            "CLIENT_MAX_BODY_SIZE": client_max_body_size,
            "CLIENT_MAX_BATCH_BODY_SIZE": "4m",
            "FORWARDED_PROTO": "$scheme",
        },
    )
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    command = [
        nginx,
        "-p",
        f"{prefix}/",
        "-c",
        str(config),
        "-g",
        f"daemon off; pid {prefix}/nginx.pid;",
    ]
    with running(
        command,
        log_path=server.error_log,
        cwd=prefix,
        ready=lambda: answers_200(f"{server.base_url}/healthz"),
        what="nginx to answer /healthz",
        timeout=30,
        stop_timeout=10,
    ):
        yield server
