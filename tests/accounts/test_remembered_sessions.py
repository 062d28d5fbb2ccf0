"""With Redis, workers remember session rows (accounts.liveness); a revoked session still fails on
its very next request. Every way a session or its adapter ends is tried after the adapter's row
has been remembered, through HTTP where the platform offers it."""

from __future__ import annotations

import os
import signal
import zlib
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import time_machine
from django.db import connection
from django.utils import timezone

from accounts import liveness
from accounts.models import Session, User
from accounts.services.accounts import account_edit
from accounts.services.sessions import REFRESH_RACE_SECONDS, sessions_revoke_for_user
from platform_site.cache import availability as redis_availability
from platform_site.embedded import redis_server
from platform_site.settings import redis_caches
from tests.accounts.api import whoami
from tests.conftest import ApiClient

pytestmark = pytest.mark.django_db

NOBODY = "redis://127.0.0.1:1/0"  # a Redis that does not answer: nothing listens there


def remembered(client: ApiClient, django_assert_num_queries: Any) -> None:
    """Two calls: the first reads the session row, the second answers from memory."""
    assert whoami(client).status_code == 200
    with django_assert_num_queries(0):
        assert whoami(client).status_code == 200


def logout(consumer: ApiClient, **_: Any) -> None:
    response = consumer.call(
        "post", "/api/auth/logout", {"refreshToken": consumer.tokens["refreshToken"]}
    )
    assert response.status_code == 200


def refresh_reuse(consumer: ApiClient, **_: Any) -> None:
    stolen = consumer.tokens["refreshToken"]
    with time_machine.travel(datetime.now(UTC)) as clock:
        assert consumer.refresh().status_code == 200
        clock.shift(REFRESH_RACE_SECONDS + 1)
        replay = consumer.call("post", "/api/auth/refresh", {"refreshToken": stolen})
    assert replay.json()["code"] == "REFRESH_TOKEN_REUSED"


def owner_rotates_password(cabinet: ApiClient, adapter: User, **_: Any) -> None:
    response = cabinet.call("post", f"/api/users/adapters/{adapter.pk}/password")
    assert response.status_code == 200


def owner_disables(cabinet: ApiClient, adapter: User, **_: Any) -> None:
    response = cabinet.call("patch", f"/api/users/adapters/{adapter.pk}", {"active": False})
    assert response.status_code == 200


def owner_deletes(cabinet: ApiClient, adapter: User, **_: Any) -> None:
    assert cabinet.call("delete", f"/api/users/adapters/{adapter.pk}").status_code == 200


def admin_action(name: str) -> Callable[..., None]:
    def act(admin_client: Any, adapter: User, **_: Any) -> None:
        admin_client.post(
            "/admin/accounts/user/", {"action": name, "_selected_action": [adapter.pk]}
        )

    act.__name__ = f"admin_{name}"
    return act


def admin_revokes_the_session(admin_client: Any, adapter: User, **_: Any) -> None:
    session = Session.objects.get(user=adapter)
    admin_client.post(
        "/admin/accounts/session/", {"action": "revoke", "_selected_action": [session.pk]}
    )


def admin_deletes_the_session(admin_client: Any, adapter: User, **_: Any) -> None:
    session = Session.objects.get(user=adapter)
    response = admin_client.post(f"/admin/accounts/session/{session.pk}/delete/", {"post": "yes"})
    assert response.status_code == 302


def admin_deletes_the_owner(admin_client: Any, owner: User, **_: Any) -> None:
    # The adapter and its sessions go with the owner (CASCADE).
    response = admin_client.post(f"/admin/accounts/user/{owner.pk}/delete/", {"post": "yes"})
    assert response.status_code == 302


ENDINGS = [
    logout,
    refresh_reuse,
    owner_rotates_password,
    owner_disables,
    owner_deletes,
    admin_action("revoke_sessions"),
    admin_action("disable"),
    admin_action("expire_account"),
    admin_revokes_the_session,
    admin_deletes_the_session,
    admin_deletes_the_owner,
]


@pytest.mark.parametrize("end", ENDINGS, ids=[end.__name__ for end in ENDINGS])
def test_a_remembered_session_fails_on_the_next_request_after_it_ends(
    sessions_remembered, end, consumer, cabinet, adapter, owner, admin_client,
    django_assert_num_queries,
):  # fmt: skip
    remembered(consumer, django_assert_num_queries)

    end(consumer=consumer, cabinet=cabinet, adapter=adapter, owner=owner, admin_client=admin_client)

    assert whoami(consumer).status_code == 401


def test_a_change_that_cannot_reach_redis_is_refused_and_changes_nothing(
    sessions_remembered, consumer, adapter, settings
):
    assert whoami(consumer).status_code == 200
    settings.CACHES = redis_caches(NOBODY)

    response = consumer.call(
        "post", "/api/auth/logout", {"refreshToken": consumer.tokens["refreshToken"]}
    )

    assert (response.status_code, response.json()["code"]) == (503, "SERVICE_UNAVAILABLE")
    assert response["Retry-After"] == "1"
    assert Session.objects.get(user=adapter).revoked_at is None


def revoke_behind_the_platforms_back(adapter: User) -> None:
    """Raw SQL, outside accounts.liveness.changing: to tell what the next request reads."""
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE accounts_session SET revoked_at = now() WHERE user_id = %s", [adapter.pk]
        )


def test_when_redis_does_not_answer_requests_read_postgresql_and_are_not_rate_limited(
    sessions_remembered, consumer, adapter, settings, django_assert_num_queries
):
    remembered(consumer, django_assert_num_queries)
    settings.EXCHANGE_RATE_LIMIT = "1/m"
    settings.CACHES = redis_caches(NOBODY)

    with django_assert_num_queries(2):  # each request reads its session
        responses = [whoami(consumer) for _ in range(2)]
    assert [r.status_code for r in responses] == [200, 200]
    assert "X-Rate-Limit-Limit" not in responses[1]

    revoke_behind_the_platforms_back(adapter)
    assert whoami(consumer).status_code == 401


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[tuple[str, int]]:
    """A redis-server of this test's own (its URL and process id), which the test may stop."""
    with redis_server(directory=tmp_path) as server:
        yield server


def test_a_redis_that_stops_answering_costs_one_request_its_timeout_and_no_more(
    own_redis, consumer, settings, django_assert_num_queries
):
    """The session check's line to Redis times out in the kernel (accounts.liveness._Line): a
    Redis that accepted the request and hangs costs that request SOCKET_TIMEOUT, then the session
    is read from PostgreSQL; and the process leaves Redis aside (platform_site.cache), so the
    requests after it do not wait at all until REDIS_UNAVAILABLE_SECONDS have passed."""
    url, pid = own_redis
    caches = redis_caches(url)
    caches["default"]["OPTIONS"]["SOCKET_TIMEOUT"] = 0.5
    settings.REDIS_URL, settings.CACHES = url, caches
    settings.REDIS_UNAVAILABLE_SECONDS = 3600
    remembered(consumer, django_assert_num_queries)  # the line is open and has answered

    os.kill(pid, signal.SIGSTOP)
    try:
        with django_assert_num_queries(1):  # the session, read from PostgreSQL
            response = whoami(consumer)
        assert redis_availability.down
        with django_assert_num_queries(3):  # each its session, and nothing waits for Redis
            later = [whoami(consumer) for _ in range(3)][-1]
    finally:
        os.kill(pid, signal.SIGCONT)
    assert response.status_code == later.status_code == 200
    assert "X-Rate-Limit-Limit" not in response  # not counted: limits fail open
    assert "X-Rate-Limit-Limit" not in later

    settings.REDIS_UNAVAILABLE_SECONDS = 0  # the while has run out: the next call tries Redis
    with django_assert_num_queries(0):  # remembered again, checked on a new line
        response = whoami(consumer)
    assert response.status_code == 200
    assert "X-Rate-Limit-Limit" in response
    assert not redis_availability.down


def test_a_revision_that_redis_lost_makes_every_remembered_row_stale(
    sessions_remembered, consumer, adapter, django_assert_num_queries
):
    remembered(consumer, django_assert_num_queries)
    revoke_behind_the_platforms_back(adapter)
    assert whoami(consumer).status_code == 200  # remembered: the raw UPDATE told nobody

    sessions_remembered.flushdb()  # a Redis restart without persistence

    assert whoami(consumer).status_code == 401


def test_a_row_is_remembered_under_the_revision_read_before_it(
    sessions_remembered, consumer, adapter
):
    """A change that lands between a request's revision read and its row read leaves a row
    stamped with the revision the change replaced: the next request reads the row again."""
    revision, _ = liveness.checked(user_id=adapter.pk, limits=[])
    sessions_revoke_for_user(user=adapter, reason="x")  # replaces the revision, and revokes

    session = Session.objects.select_related("user").get(user=adapter)
    session.revoked_at = None  # as it was read before the change
    liveness.remember(session.pk, revision, session)
    session_id = session.pk

    assert liveness.remembered(session_id, revision) is not None
    assert whoami(consumer).status_code == 401


def test_quiet_writes_leave_the_revision_alone(sessions_remembered, consumer, adapter):
    def revision() -> bytes:
        value: bytes = sessions_remembered.get(f"auth:revision:{adapter.pk}")
        return value

    assert whoami(consumer).status_code == 200
    before = revision()

    assert consumer.refresh().status_code == 200  # the refresh rotation
    User.objects.filter(pk=adapter.pk).update(last_login=timezone.now())
    assert revision() == before

    adapter.first_name = "ERP"
    account_edit(user=adapter, changed={"first_name"}, actor=None)
    assert revision() != before


def test_the_rate_limit_counts_in_the_same_round_trip_with_its_headers(
    sessions_remembered, consumer, adapter, settings
):
    settings.EXCHANGE_RATE_LIMIT = "2/m"
    now = datetime.now(UTC)

    with time_machine.travel(now, tick=False):  # no window ends between the three calls
        responses = [whoami(consumer) for _ in range(3)]

    assert [r.status_code for r in responses] == [200, 200, 429]
    assert [r["X-Rate-Limit-Remaining"] for r in responses] == ["1", "0", "0"]
    assert responses[2].json()["code"] == "RATE_LIMITED"
    # The window ends at an offset of the adapter's own within the minute, as django-ratelimit's.
    second = int(now.timestamp())
    ends = second - second % 60 + zlib.crc32(f"adapter:{adapter.pk}".encode()) % 60
    if ends < second:
        ends += 60
    assert int(responses[2]["Retry-After"]) == max(1, ends - second)


def test_cabinet_endpoints_count_per_user_when_the_session_check_counts_nothing(
    sessions_remembered, cabinet, settings
):
    # The session check counts only the exchange's limits; a cabinet endpoint counts its own.
    settings.ACCOUNTS_RATE_LIMIT_USER = "2/m"

    with time_machine.travel(datetime.now(UTC), tick=False):
        responses = [cabinet.call("get", "/api/users/me") for _ in range(3)]

    assert [r.status_code for r in responses] == [200, 200, 429]
    assert [r["X-Rate-Limit-Remaining"] for r in responses] == ["1", "0", "0"]


def test_each_request_gets_its_own_copy_of_a_remembered_session(
    sessions_remembered, consumer, adapter
):
    stored = Session.objects.select_related("user").get(user=adapter)
    revision, _ = liveness.checked(user_id=adapter.pk, limits=[])
    liveness.remember(stored.pk, revision, stored)

    first = liveness.remembered(stored.pk, revision)
    assert first is not None
    first.last_used_at = datetime(2001, 1, 1, tzinfo=UTC)
    first.user.username = "changed-by-one-request"
    second = liveness.remembered(stored.pk, revision)

    assert second is not None
    assert second is not first
    assert second.user is not first.user
    assert second.last_used_at == stored.last_used_at
    assert second.user.username == adapter.username
    assert (second.pk, second.user_id, second.user.pk) == (stored.pk, adapter.pk, adapter.pk)
    assert not second._state.adding
    assert second._state.db == "default"
    # The remembered instances are not the caller's either.
    stored.device_id = "changed-after-remembering"
    third = liveness.remembered(stored.pk, revision)
    assert third is not None
    assert third.device_id != "changed-after-remembering"
