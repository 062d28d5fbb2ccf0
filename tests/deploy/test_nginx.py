"""deploy/nginx, rendered as the official image renders it (envsubst of the template's variables)
and run by Debian's nginx (`make nginx` installs it): `nginx -t`, then a live nginx on a loopback
port in front of a stub backend thread.
"""

from __future__ import annotations

import http.client
import json
import re
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from exchange.api.serializers import MAX_WAIT_SECONDS
from platform_site.embedded import free_port

ROOT = Path(__file__).resolve().parents[2]
NGINX_DIR = ROOT / "deploy" / "nginx"
TEMPLATE_VARIABLES = (
    "NGINX_PORT",
    "BACKEND",
    "STATIC_ROOT",
    "ACCESS_LOG",
    "CLIENT_MAX_BODY_SIZE",
    "CLIENT_MAX_BATCH_BODY_SIZE",
    "FORWARDED_PROTO",
)
ACCESS_LOG_FIELDS = {
    "time",
    "status",
    "request",
    "http_referer",
    "body_bytes_sent",
    "ip",
    "ua",
    "http_x_forwarded_for",
}


def nginx_binary() -> str:
    found = shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin:/usr/local/sbin")
    if not found:
        pytest.fail(
            "nginx is missing: `make nginx` (part of `make test`) installs Debian's package"
        )
    return found


def render(template: str, values: dict[str, str]) -> str:
    """What the official image's envsubst does: ${NAME} of the given names, nothing else (nginx's
    own $variables stay)."""
    rendered = re.sub(r"\$\{(\w+)\}", lambda m: values.get(m.group(1), m.group(0)), template)
    assert "${" not in rendered, "a template variable has no value"
    return rendered


@dataclass
class Prefix:
    path: Path
    port: int
    static: Path
    access_log: Path

    @property
    def args(self) -> list[str]:
        return [
            "-p",
            f"{self.path}/",
            "-c",
            str(self.path / "nginx.conf"),
            "-e",
            "stderr",
            "-g",
            f"pid {self.path}/nginx.pid;",
        ]


@contextmanager
def make_prefix(
    backend: str,
    body_size: str = "1m",
    batch_body_size: str = "4m",
    forwarded_proto: str = "$scheme",
) -> Iterator[Prefix]:
    # World-readable: nginx's workers (nobody, when started as root) read the static files.
    path = Path(tempfile.mkdtemp(prefix="platform-nginx-"))
    try:
        path.chmod(0o755)
        (path / "conf.d").mkdir()
        static = path / "static"
        (static / "css").mkdir(parents=True)
        (static / "css" / "app.css").write_text("body { color: black; }\n" * 100)
        shutil.copy(NGINX_DIR / "nginx.conf", path / "nginx.conf")
        shutil.copy("/etc/nginx/mime.types", path / "mime.types")
        port = free_port()
        access_log = path / "access.log"
        values = {
            "NGINX_PORT": f"127.0.0.1:{port}",
            "BACKEND": backend,
            "STATIC_ROOT": str(static),
            "ACCESS_LOG": str(access_log),
            "CLIENT_MAX_BODY_SIZE": body_size,
            "CLIENT_MAX_BATCH_BODY_SIZE": batch_body_size,
            "FORWARDED_PROTO": forwarded_proto,
        }
        for template in (NGINX_DIR / "templates").glob("*.template"):
            target = path / "conf.d" / template.name.removesuffix(".template")
            target.write_text(render(template.read_text(), values))
        for item in path.rglob("*"):
            item.chmod(0o755 if item.is_dir() else 0o644)
        yield Prefix(path=path, port=port, static=static, access_log=access_log)
    finally:
        shutil.rmtree(path, ignore_errors=True)


def test_template_uses_exactly_the_documented_variables() -> None:
    text = (NGINX_DIR / "templates" / "platform.conf.template").read_text()
    assert set(re.findall(r"\$\{(\w+)\}", text)) == set(TEMPLATE_VARIABLES)


def test_nginx_accepts_the_configuration() -> None:
    nginx = nginx_binary()
    with make_prefix(backend="127.0.0.1:9") as prefix:
        result = subprocess.run(
            [nginx, "-t", *prefix.args], capture_output=True, text=True, timeout=30, check=False
        )
        assert result.returncode == 0, result.stderr
        assert "test is successful" in result.stderr


def test_long_polls_and_streams_fit_in_the_proxy_timeouts() -> None:
    text = (NGINX_DIR / "templates" / "platform.conf.template").read_text()
    (read_timeout,) = re.findall(r"proxy_read_timeout\s+(\d+)s;", text)
    assert int(read_timeout) > MAX_WAIT_SECONDS  # the exchange API's longest long poll
    # A stream's heartbeat, at most 60 s (tests/platform/test_settings.py refuses 61).
    assert int(read_timeout) > 60


# --- a live nginx in front of a stub backend --------------------------------------------------------


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class StubBackend:
    server: ThreadingHTTPServer
    requests: list[Seen] = field(default_factory=list)

    @property
    def address(self) -> str:
        host, port = self.server.server_address[:2]
        return f"{host!s}:{port}"


@pytest.fixture
def backend() -> Iterator[StubBackend]:
    seen: list[Seen] = []

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            seen.append(Seen(self.command, self.path, dict(self.headers.items()), body))
            payload = json.dumps({"path": self.path}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            # As Django's SecurityMiddleware does: nginx must not add a second one.
            self.send_header("X-Frame-Options", "SAMEORIGIN")
            self.end_headers()
            self.wfile.write(payload)

        do_GET = do_POST = answer

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield StubBackend(server, seen)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.fixture
def proxy(backend: StubBackend) -> Iterator[Prefix]:
    with running_proxy(backend) as prefix:
        yield prefix


@contextmanager
def running_proxy(backend: StubBackend, forwarded_proto: str = "$scheme") -> Iterator[Prefix]:
    nginx = nginx_binary()
    with make_prefix(backend=backend.address, forwarded_proto=forwarded_proto) as prefix:
        process = subprocess.Popen(
            [nginx, *prefix.args[:-1], f"pid {prefix.path}/nginx.pid; daemon off;"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            deadline = time.monotonic() + 10
            while True:
                try:
                    socket.create_connection(("127.0.0.1", prefix.port), timeout=1).close()
                    break
                except OSError:
                    if process.poll() is not None or time.monotonic() > deadline:
                        _, stderr = process.communicate(timeout=5)
                        pytest.fail(f"nginx did not start: {stderr.decode()}")
                    time.sleep(0.05)
            yield prefix
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=5)
        # Stopped: nothing listens on its port any more.
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", prefix.port), timeout=1).close()


def request(
    prefix: Prefix,
    method: str,
    path: str,
    *,
    headers: dict[str, str] | None = None,
    body: bytes | None = None,
) -> tuple[int, dict[str, list[str]], bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", prefix.port, timeout=10)
    try:
        connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        collected: dict[str, list[str]] = {}
        for name, value in response.getheaders():
            collected.setdefault(name.lower(), []).append(value)
        return response.status, collected, response.read()
    finally:
        connection.close()


def test_healthz_is_answered_by_nginx_alone(proxy: Prefix, backend: StubBackend) -> None:
    status, headers, body = request(proxy, "GET", "/healthz")
    assert status == 200
    assert headers["content-type"] == ["text/plain"]
    assert body == b"ok\n"
    assert headers["x-content-type-options"] == ["nosniff"]
    assert headers["x-frame-options"] == ["DENY"]
    assert backend.requests == []


def test_actuator_is_never_proxied(proxy: Prefix, backend: StubBackend) -> None:
    for path in (
        "/actuator",
        "/actuator/",
        "/actuator/prometheus",
        "/actuator/metrics/http.server.requests?tag=status:200",
        "/actuator/health",
        "//actuator/prometheus",
        "/%61ctuator/prometheus",
        "/api/../actuator/prometheus",
        "/api/actuator/prometheus",
        "/api/actuator/metrics",
    ):
        status, _, _ = request(proxy, "GET", path)
        assert status == 404, path
    assert backend.requests == []


def test_api_is_proxied_with_forwarding_headers(proxy: Prefix, backend: StubBackend) -> None:
    status, headers, body = request(
        proxy,
        "POST",
        "/api/x?y=1",
        headers={
            "X-Forwarded-For": "203.0.113.7",
            "X-Request-ID": "trace-42",
            "Content-Type": "application/json",
        },
        body=b'{"a": 1}',
    )
    assert status == 200
    assert json.loads(body) == {"path": "/api/x?y=1"}
    # The backend's own security header is passed on once, not doubled.
    assert headers["x-frame-options"] == ["SAMEORIGIN"]
    status, _, _ = request(proxy, "GET", "/api/actuator/health/readiness")
    assert status == 200
    first, second = backend.requests
    assert first.method == "POST"
    assert first.body == b'{"a": 1}'
    assert first.headers["X-Forwarded-For"] == "203.0.113.7, 127.0.0.1"
    assert first.headers["X-Request-ID"] == "trace-42"
    assert first.headers["X-Forwarded-Proto"] == "http"
    # Without the client's id nginx makes one up, so the backend's log line always has one.
    assert second.path == "/api/actuator/health/readiness"
    assert re.fullmatch(r"[0-9a-f]{32}", second.headers["X-Request-ID"])
    assert second.headers["X-Forwarded-For"] == "127.0.0.1"


def test_forwarded_proto_is_nginx_own_unless_a_tls_terminator_sets_it(
    proxy: Prefix, backend: StubBackend
) -> None:
    """Where nginx is the edge (compose: FORWARDED_PROTO=$scheme) a client cannot claim https;
    behind an ingress controller that ends TLS (deploy/k8s: $http_x_forwarded_proto) its header
    is passed on, so Django sees the request as secure and does not redirect it forever."""
    request(proxy, "GET", "/api/x", headers={"X-Forwarded-Proto": "https"})
    with running_proxy(backend, forwarded_proto="$http_x_forwarded_proto") as behind_ingress:
        request(behind_ingress, "GET", "/api/x", headers={"X-Forwarded-Proto": "https"})
    at_the_edge, behind_a_terminator = backend.requests
    assert at_the_edge.headers["X-Forwarded-Proto"] == "http"
    assert behind_a_terminator.headers["X-Forwarded-Proto"] == "https"


def test_oversized_body_is_refused_with_413(proxy: Prefix, backend: StubBackend) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=10)
    try:
        # Only the headers: nginx refuses on Content-Length before reading a byte of the body.
        connection.putrequest("POST", "/api/exchange/messages")
        connection.putheader("Content-Type", "application/json")
        connection.putheader("Content-Length", str(2 * 1024 * 1024))
        connection.endheaders()
        response = connection.getresponse()
        assert response.status == 413
    finally:
        connection.close()
    # A body at the limit still goes through.
    status, _, _ = request(proxy, "POST", "/api/x", body=b"x" * (1024 * 1024 - 1))
    assert status == 200
    assert [seen.path for seen in backend.requests] == ["/api/x"]


def test_only_the_batch_send_takes_a_larger_body(proxy: Prefix, backend: StubBackend) -> None:
    two_megabytes = b"x" * (2 * 1024 * 1024)
    status, _, _ = request(proxy, "POST", "/api/exchange/messages/batch", body=two_megabytes)
    assert status == 200
    assert backend.requests[0].path == "/api/exchange/messages/batch"
    assert backend.requests[0].body == two_megabytes
    # Its limit is its own (4m here); beside it, the server-wide 1m still holds.
    for path, size in (
        ("/api/exchange/messages/batch", 4 * 1024 * 1024 + 1),
        ("/api/exchange/messages/batch/", 2 * 1024 * 1024),
        ("/api/exchange/messages", 2 * 1024 * 1024),
    ):
        status, _, _ = request(proxy, "POST", path, body=b"x" * size)
        assert status == 413, path
    assert len(backend.requests) == 1


def test_static_files_are_served_compressed(proxy: Prefix, backend: StubBackend) -> None:
    status, headers, _ = request(
        proxy, "GET", "/static/css/app.css", headers={"Accept-Encoding": "gzip"}
    )
    assert status == 200
    assert headers["content-type"] == ["text/css"]
    assert headers["content-encoding"] == ["gzip"]
    assert "max-age=604800" in headers["cache-control"]
    assert backend.requests == []


def test_access_log_line_is_one_json_object_of_the_constant_fields(
    proxy: Prefix, backend: StubBackend
) -> None:
    request(
        proxy,
        "GET",
        '/api/x?q="quoted"',
        headers={
            "User-Agent": 'probe "1"',
            "Referer": "https://example.test/page",
            "X-Forwarded-For": "198.51.100.9",
        },
    )
    request(proxy, "GET", "/healthz")
    deadline = time.monotonic() + 5
    while len(proxy.access_log.read_text().splitlines()) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    proxied, probe = (json.loads(line) for line in proxy.access_log.read_text().splitlines())
    for line in (proxied, probe):
        assert set(line) == ACCESS_LOG_FIELDS
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d", line["time"])
        assert isinstance(line["status"], int)
        assert isinstance(line["body_bytes_sent"], int)
        assert line["ip"] == "127.0.0.1"
    assert proxied["status"] == 200
    assert proxied["request"] == 'GET /api/x?q="quoted" HTTP/1.1'
    assert proxied["http_referer"] == "https://example.test/page"
    assert proxied["ua"] == 'probe "1"'
    assert proxied["http_x_forwarded_for"] == "198.51.100.9"
    assert probe["request"] == "GET /healthz HTTP/1.1"
    assert probe["body_bytes_sent"] == 3
