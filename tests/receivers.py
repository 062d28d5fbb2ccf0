"""Real HTTP(S) endpoints for the webhook tests: a threaded server on loopback that records every
request and answers as the test says (a status, headers, a delay)."""

from __future__ import annotations

import datetime
import ipaddress
import json
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]  # names in lower case
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Answer:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    delay: float = 0.0  # seconds before answering


@dataclass
class Receiver:
    url: str
    received: list[Received]
    # What to answer a request: set by the test at any time.
    answer: Callable[[Received], Answer]
    arrived: threading.Condition

    def wait_for(self, count: int, timeout: float = 10.0) -> list[Received]:
        """The requests, once ``count`` have come (or what came within ``timeout``)."""
        with self.arrived:
            self.arrived.wait_for(lambda: len(self.received) >= count, timeout)
            return list(self.received)


@contextmanager
def receiver(
    *, tls: ssl.SSLContext | None = None, host: str = "127.0.0.1", name: str | None = None
) -> Iterator[Receiver]:
    """An endpoint at http(s)://{name or host}:{port}/hook answering 200 until told otherwise."""
    state = Receiver(url="", received=[], answer=lambda _: Answer(), arrived=threading.Condition())

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", 0))
            request = Received(
                path=self.path,
                headers={key.lower(): value for key, value in self.headers.items()},
                body=self.rfile.read(length),
            )
            with state.arrived:
                state.received.append(request)
                state.arrived.notify_all()
            answer = state.answer(request)
            if answer.delay:
                time.sleep(answer.delay)
            try:
                self.send_response(answer.status)
                for key, value in answer.headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(answer.body)))
                self.end_headers()
                self.wfile.write(answer.body)
            except OSError:
                pass  # the deliverer gave up on it (a timeout)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer((host, 0), Handler)
    server.daemon_threads = True
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    scheme = "https" if tls is not None else "http"
    state.url = f"{scheme}://{name or host}:{server.server_address[1]}/hook"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()


def tls_for_localhost(directory: Path) -> tuple[ssl.SSLContext, Path]:
    """A server context for ``localhost`` (and 127.0.0.1) signed by a CA of its own, and the CA's
    certificate file (what EXCHANGE_WEBHOOK_CA_BUNDLE names)."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "webhook test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(
            x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    certificate = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    ca_file, chain_file, key_file = (
        directory / "ca.pem",
        directory / "localhost.pem",
        directory / "localhost.key",
    )
    ca_file.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    chain_file.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(chain_file, key_file)
    return context, ca_file
