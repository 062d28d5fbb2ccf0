"""The platform's own server (platform_site.server under uvicorn) in a thread of the test process,
over the test database: what `live_server` gives the tests that need a real server (long polls
that wait on the event loop, browsers), and a JSON client for it."""

from __future__ import annotations

import threading
from typing import Any

import httpx
import uvicorn
from django.test.utils import modify_settings

from platform_site.asgi import serve
from platform_site.embedded import free_port
from platform_site.server import Server
from platform_site.worker import Server as StoppingServer
from platform_site.worker import Worker
from tests.factories import DEFAULT_PASSWORD


class _Started(StoppingServer):
    """The production worker's uvicorn server, telling another thread when it listens and its
    lifespan has started."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.ready = threading.Event()

    async def startup(self, sockets: Any = None) -> None:
        await super().startup(sockets)
        self.ready.set()


class LiveServer:
    """pytest-django's LiveServer, served by the platform's ASGI application: ``url``, ``+``,
    and the settings pytest-django's helper enables around each test."""

    def __init__(self, host: str = "localhost", app: Server | None = None) -> None:
        self.port = free_port()
        # Static files as runserver serves them (DEBUG is off in the tests; nginx serves them in
        # production): the browser tests load the stylesheet and scripts.
        self.app: Server = app or serve(threads=8, static=True)
        # The production worker's settings (uvloop, httptools, lifespan, no proxy headers).
        config = uvicorn.Config(
            self.app, host="127.0.0.1", port=self.port, log_config=None, **Worker.CONFIG_KWARGS
        )
        self.server = _Started(config)
        self.thread = threading.Thread(target=self.server.run, name="live-server", daemon=True)
        self.host = host
        self._live_server_modified_settings = modify_settings(ALLOWED_HOSTS={"append": host})
        self.thread.start()
        if not self.server.ready.wait(30):
            raise RuntimeError("the live server did not start")

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def __str__(self) -> str:
        return self.url

    def __add__(self, other: str) -> str:
        return f"{self}{other}"

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)


class LiveClient:
    """ApiClient's calls over HTTP to a live server: a token pair and a device id remembered."""

    def __init__(self, server: LiveServer, *, device_id: str | None = None) -> None:
        self.http = httpx.Client(base_url=f"http://127.0.0.1:{server.port}", timeout=60)
        self.device_id = device_id
        self.tokens: dict[str, Any] = {}

    def call(self, method: str, path: str, body: Any = None, **headers: str) -> httpx.Response:
        sent = dict(headers)
        if self.device_id is not None:
            sent["X-Device-ID"] = self.device_id
        if self.tokens.get("accessToken"):
            sent["Authorization"] = f"Bearer {self.tokens['accessToken']}"
        return self.http.request(method.upper(), path, json=body, headers=sent)

    def sign_in(self, username: str, password: str = DEFAULT_PASSWORD) -> httpx.Response:
        response = self.call(
            "post", "/api/auth/login/username", {"username": username, "password": password}
        )
        if response.status_code == 200:
            self.tokens = response.json()
        return response

    def close(self) -> None:
        self.http.close()
