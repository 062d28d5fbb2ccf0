from __future__ import annotations

import json
import os
import re
import tempfile
import threading
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import dj_database_url
import pytest
from django.conf import settings
from django.contrib.auth.hashers import get_hasher
from django.core.cache import caches
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import translation

from accounts.models import User
from exchange.wakeups import Ticket
from platform_site import embedded
from tests.enumeration import (
    ARGON2_HASHER,
    RECORDING_HASHER,
    RecordingArgon2PasswordHasher,
    Work,
    statement_shape,
)
from tests.factories import DEFAULT_PASSWORD, AdapterFactory, UserFactory
from tests.live import LiveServer

ROOT = Path(__file__).resolve().parents[1]  # the repository


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix: None) -> None:
    """Without DATABASE_URL the suite runs on the embedded PostgreSQL, started here on demand."""
    if os.environ.get("DATABASE_URL"):
        return
    url = embedded.server_start(pgdata=embedded.PGDATA)
    parsed = dj_database_url.parse(url)
    settings.DATABASES["default"].update(
        {key: parsed[key] for key in ("HOST", "PORT", "USER", "PASSWORD")}  # type: ignore[literal-required]
    )


def pytest_configure(config: pytest.Config) -> None:
    # Hypothesis keeps examples and constants under ./.hypothesis: the tests write nothing into
    # the checkout.
    from hypothesis.configuration import set_hypothesis_home_dir

    set_hypothesis_home_dir(Path(tempfile.mkdtemp(prefix="hypothesis-")))

    # CI sets CELERY_BROKER_URL for the stack tests; in-process tests run tasks inline.
    from platform_site.celery import app

    app.conf.task_always_eager = True
    # The live server's processes deliver no webhooks: the tests that push run a deliverer of
    # their own, one round at a time (tests/exchange/test_webhook_delivery.py); that deploy/serve
    # delivers by itself is tests/stack/test_webhooks.py's.
    settings.EXCHANGE_WEBHOOK_DELIVERY_SEPARATE = True
    # Outermost, so that it sees each answer as the client gets it (tests/problem_answers.py).
    settings.MIDDLEWARE = ["tests.problem_answers.AnswerRecorder", *settings.MIDDLEWARE]


@pytest.fixture(autouse=True)
def _argon2_at_its_lowest_cost(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Passwords hashed in the test process by Argon2id with its least time, memory and lanes,
    for Django's hasher and the tests' recording one (tests/enumeration.py) alike: at the
    configured cost a password check takes about a sixth of a second here, and the in-process
    tests took 7 times as long (tests/accounts: 487 s against 69 s). The configured cost is
    kept where it is what is tested: the tests marked real_hashing check it, and the stack
    tests' servers hash at it (their users are hashed alike here, so a sign-in there does not
    rehash them)."""
    marker = request.node.get_closest_marker
    if marker("real_hashing") is not None or marker("stack") is not None:
        return
    from django.contrib.auth.hashers import Argon2PasswordHasher

    monkeypatch.setattr(Argon2PasswordHasher, "time_cost", 1)
    monkeypatch.setattr(Argon2PasswordHasher, "memory_cost", 8)  # KiB: the least for one lane
    monkeypatch.setattr(Argon2PasswordHasher, "parallelism", 1)


@pytest.fixture(scope="session", autouse=True)
def _answers_the_schema_declares() -> Iterator[None]:
    """After the run: every problem an operation of /api/schema/ answered in it is declared there,
    with its status, code and members (tests/problem_answers.py). A missing one fails the run
    (an error at the teardown of its last test) with the list."""
    from tests.problem_answers import OBSERVED, generated_schema, undeclared

    yield
    found = undeclared(OBSERVED, generated_schema()) if OBSERVED else []
    assert not found, (
        "Answers that the OpenAPI schema does not declare: declare the error on the view "
        "(@answers, platform_site/openapi.py) or where accounts/schema.py adds it.\n"
        + "\n".join(found)
    )


@pytest.fixture(autouse=True)
def _sms_in_memory(settings: Any) -> None:
    from accounts import sms

    settings.SMS_BACKEND = "memory"
    sms.outbox.clear()


def last_code(to: str) -> str:
    """The code in the newest e-mail or SMS queued for ``to`` (read from the outbox table, which
    holds what was sent whether or not the transaction's on-commit task ran in the test)."""
    from accounts.models import OutboxMessage

    message = OutboxMessage.objects.filter(to__iexact=to).order_by("-pk").first()
    assert message is not None, f"nothing was queued for {to}"
    match = re.search(r"\b(\d{6})\b", message.text)
    assert match is not None, message.text
    return match.group(1)


@pytest.fixture(autouse=True)
def _default_language() -> Iterator[None]:
    # LocaleMiddleware leaves the last request's language active in the thread.
    yield
    translation.activate(settings.LANGUAGE_CODE)


@pytest.fixture(autouse=True)
def _empty_caches() -> None:
    # Rate-limit counters and cached sessions live in the cache (Redis in CI): no test sees
    # another's.
    for cache in caches.all():
        cache.clear()


# Each worker remembers sessions (accounts.liveness) only with Redis. CI's whole suite runs with
# REDIS_URL, a local `make test` without; these fixtures pin a test to one mode either way.
LIVENESS_REDIS_URL = "redis://127.0.0.1:6379/13"


@pytest.fixture(autouse=True)
def _redis_taken_to_answer() -> None:
    # A test whose Redis failed leaves the process leaving Redis aside (platform_site.cache):
    # each test starts as a process does, trusting it.
    from platform_site.cache import availability

    availability.answered()


@pytest.fixture(autouse=True)
def _forget_remembered_sessions() -> Iterator[None]:
    from accounts import liveness

    liveness._remembered.clear()
    yield
    liveness._remembered.clear()


@pytest.fixture
def sessions_in_postgres(settings: Any) -> None:
    """No Redis: every request reads its session row from PostgreSQL."""
    settings.REDIS_URL = ""
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}


@pytest.fixture
def sessions_remembered(settings: Any) -> Any:
    """Redis (a database of these tests' own, emptied): workers remember session rows under
    revisions. Returns a redis-py client of that database."""
    from django_redis import get_redis_connection

    from platform_site.settings import redis_caches

    settings.REDIS_URL = LIVENESS_REDIS_URL
    settings.CACHES = redis_caches(LIVENESS_REDIS_URL)
    client = get_redis_connection("default")
    client.flushdb()
    return client


@pytest.fixture
def admin_user(db: Any) -> Any:
    """A superuser with a second factor, which ACCOUNTS_STAFF_REQUIRE_TWO_FACTOR asks of staff
    before the admin opens."""
    return UserFactory.create(
        username="root",
        is_staff=True,
        is_superuser=True,
        phone="+4915199999999",
        two_factor_enabled=True,
        code_factor="SMS",
    )


@pytest.fixture
def admin_client(admin_user: Any) -> Client:
    client = Client()
    client.force_login(admin_user)
    return client


class ApiClient(Client):
    """A Django test client for the JSON API that remembers a token pair and a device id."""

    def __init__(self, *, device_id: str | None = None, **defaults: Any) -> None:
        super().__init__(raise_request_exception=False, **defaults)
        self.device_id = device_id
        self.tokens: dict[str, Any] = {}

    def _headers(self, extra: dict[str, Any]) -> dict[str, Any]:
        headers: dict[str, Any] = {}
        if self.device_id is not None:
            headers["HTTP_X_DEVICE_ID"] = self.device_id
        if self.tokens.get("accessToken"):
            headers["HTTP_AUTHORIZATION"] = f"Bearer {self.tokens['accessToken']}"
        headers.update(extra)
        return headers

    def call(self, method: str, path: str, body: Any = None, **extra: Any) -> Any:
        """``method`` on ``path`` with the JSON ``body``, or with no body at all (no content, as
        an HTTP client sends a POST without one: not Django's empty multipart form)."""
        if body is not None:
            data: dict[str, Any] = {"data": json.dumps(body), "content_type": "application/json"}
        elif method == "get":
            data = {}
        else:
            data = {"data": b"", "content_type": "application/json"}
        return getattr(self, method)(path, **data, **self._headers(extra))

    def call_text(self, method: str, path: str, text: str, **extra: Any) -> Any:
        """``call`` with a JSON body written by hand: what json.dumps would not write."""
        return getattr(self, method)(
            path, data=text, content_type="application/json", **self._headers(extra)
        )

    def sign_in(self, username: str, password: str = DEFAULT_PASSWORD) -> Any:
        response = self.call(
            "post", "/api/auth/login/username", {"username": username, "password": password}
        )
        if response.status_code == 200:
            self.tokens = response.json()
        return response

    def refresh(self) -> Any:
        response = self.call(
            "post", "/api/auth/refresh", {"refreshToken": self.tokens["refreshToken"]}
        )
        if response.status_code == 200:
            self.tokens = {**self.tokens, **response.json()}
        return response


@pytest.fixture
def owner(db: Any) -> User:
    return UserFactory.create(username="owner", email="owner@example.com")


@pytest.fixture
def person(db: Any) -> User:
    """A cabinet user with a phone number."""
    return UserFactory.create(username="grace", email="grace@example.com", phone="+4915123456789")


@pytest.fixture
def adapter(owner: User) -> User:
    return AdapterFactory.create(username="erp", owner=owner)


@pytest.fixture
def consumer(adapter: User) -> ApiClient:
    """The adapter, signed in from device "consumer-1"."""
    client = ApiClient(device_id="consumer-1")
    assert client.sign_in(adapter.username).status_code == 200
    return client


@pytest.fixture
def cabinet(owner: User) -> ApiClient:
    """The owner, signed in to the API as a cabinet user."""
    client = ApiClient(device_id="browser-1")
    response = client.call(
        "post", "/api/auth/login/email", {"email": owner.email, "password": DEFAULT_PASSWORD}
    )
    assert response.status_code == 200, response.content
    client.tokens = response.json()
    return client


@pytest.fixture
def work_of(settings: Any, django_capture_on_commit_callbacks: Any) -> Callable[..., Work]:
    """``work_of(call)`` makes the request ``call()`` and returns the work it did: the password
    hashes it computed (with the real Argon2 hasher, recording), its SQL statements' shapes and
    its on-commit callbacks (tests/enumeration.py)."""
    assert settings.PASSWORD_HASHERS[0] == ARGON2_HASHER, "the recording hasher is Argon2's"
    settings.PASSWORD_HASHERS = [RECORDING_HASHER, *settings.PASSWORD_HASHERS[1:]]
    # get_hasher() reads a cache that the settings fixture's setting_changed signal clears.
    hasher = get_hasher()
    assert isinstance(hasher, RecordingArgon2PasswordHasher), hasher

    def work_of(call: Callable[[], Any]) -> Work:
        hasher.computed.clear()
        with (
            CaptureQueriesContext(connection) as queries,
            django_capture_on_commit_callbacks() as callbacks,
        ):
            response = call()
        return Work(
            status=response.status_code,
            hashing=list(hasher.computed),
            statements=[statement_shape(query["sql"]) for query in queries.captured_queries],
            on_commit=[callback.__qualname__ for callback in callbacks],
        )

    return work_of


class LongPolls:
    """The waits of this process's long polls (exchange.wakeups.Wakeups.arrival), numbered from 1
    in the order they start. A test acts when a long poll really waits (on the live server's event
    loop, its thread and database connection handed back), not after a guessed delay."""

    def __init__(
        self, arrival: Callable[[Ticket, float], Awaitable[bool]], listening: threading.Event
    ) -> None:
        self._arrival = arrival
        self._listening = listening
        self._condition = threading.Condition()
        self._started = 0
        self._waiting: set[int] = set()
        self._actions: dict[int, Callable[[], None]] = {}
        # Each wait's end: True when a notification (or the listener's start) ended it, False
        # when it ran out.
        self.woken: dict[int, bool] = {}

    async def arrival(self, ticket: Ticket, seconds: float) -> bool:
        """Stands in for Wakeups.arrival."""
        with self._condition:
            self._started += 1
            number = self._started
            action = self._actions.pop(number, None)
        if action is not None:
            action()
        with self._condition:
            self._waiting.add(number)
            self._condition.notify_all()
        woken = await self._arrival(ticket, seconds)
        self.woken[number] = woken
        return woken

    def waiting(self, number: int = 1, *, timeout: float = 10) -> None:
        """Return once wait ``number`` has started and the process's listener listens: the first
        wait starts the listener, and a send before it listens would wake nobody."""
        with self._condition:
            assert self._condition.wait_for(lambda: number in self._waiting, timeout), (
                f"wait {number} never started"
            )
        assert self._listening.wait(timeout), "the listener never listened"

    def before_waiting(self, number: int, action: Callable[[], None]) -> None:
        """Run ``action`` as wait ``number`` starts, before it waits."""
        with self._condition:
            self._actions[number] = action


@pytest.fixture
def long_polls(monkeypatch: pytest.MonkeyPatch) -> LongPolls:
    """Watches the waits of this process's long polls (LongPolls)."""
    from exchange.wakeups import wakeups

    polls = LongPolls(wakeups.arrival, wakeups.listening)
    monkeypatch.setattr(wakeups, "arrival", polls.arrival)
    return polls


@pytest.fixture(scope="session")
def live_server(django_db_setup: None) -> Iterator[LiveServer]:
    """The platform's own server (tests/live.py) in place of pytest-django's WSGI one; its
    helper gives each test that uses it a transactional database. It stops before the test
    database is dropped: its listener's connection would keep it."""
    server = LiveServer()
    yield server
    server.stop()
