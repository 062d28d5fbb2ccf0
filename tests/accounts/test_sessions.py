"""Token sessions: rotation, reuse, absolute lifetime, logout, device binding, revocation
(docs/sessions.md, "Tokens and sessions"); a cabinet user's list of their own sessions."""

from __future__ import annotations

import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import time_machine
from django.db import connections
from django.test import RequestFactory

from accounts.models import Session
from accounts.services.sessions import REFRESH_RACE_SECONDS
from platform_site.clients import client_ip
from platform_site.database import direct_connect
from tests.accounts.api import T0, outcome, signed_in, whoami
from tests.conftest import ApiClient

pytestmark = pytest.mark.django_db


def test_whoami_names_the_adapter_its_session_and_device(consumer, adapter):
    body = whoami(consumer).json()

    assert body == {
        "adapterId": adapter.pk,
        "login": "erp",
        "ownerId": adapter.owner_id,
        "sessionId": str(Session.objects.get(user=adapter).pk),
        "deviceId": "consumer-1",
        "accessTokenExpiresAt": consumer.tokens["accessTokenExpiresAt"],
    }


def test_every_sign_in_starts_its_own_session_with_fresh_identifiers(adapter):
    first, second = ApiClient(device_id="a"), ApiClient(device_id="a")
    first.sign_in("erp")
    second.sign_in("erp")

    assert Session.objects.filter(user=adapter).count() == 2
    assert first.tokens["accessToken"] != second.tokens["accessToken"]
    assert whoami(first).json()["sessionId"] != whoami(second).json()["sessionId"]


def test_refresh_returns_a_new_pair_and_the_old_refresh_token_dies(consumer):
    old = dict(consumer.tokens)

    response = consumer.refresh()

    assert response.status_code == 200
    assert list(response.json()) == [
        "accessToken",
        "accessTokenExpiresAt",
        "refreshToken",
        "refreshTokenExpiresAt",
    ]
    assert consumer.tokens["refreshToken"] != old["refreshToken"]
    assert whoami(consumer).status_code == 200


def test_presenting_a_rotated_refresh_token_again_revokes_the_whole_session(consumer):
    stolen = consumer.tokens["refreshToken"]
    with time_machine.travel(datetime.now(UTC)) as clock:
        consumer.refresh()
        clock.shift(REFRESH_RACE_SECONDS + 1)
        replay = consumer.call("post", "/api/auth/refresh", {"refreshToken": stolen})

        assert outcome(replay) == (401, "REFRESH_TOKEN_REUSED")
        assert outcome(whoami(consumer)) == (401, "TOKEN_REVOKED")
        assert outcome(consumer.refresh()) == (401, "TOKEN_REVOKED")
    assert Session.objects.get().revoked_reason == "refresh_reuse"


def test_reuse_ends_only_that_session_not_the_adapters_others(adapter):
    victim, other = ApiClient(device_id="one"), ApiClient(device_id="two")
    victim.sign_in("erp")
    other.sign_in("erp")
    stolen = victim.tokens["refreshToken"]
    with time_machine.travel(datetime.now(UTC)) as clock:
        victim.refresh()
        clock.shift(REFRESH_RACE_SECONDS + 1)
        victim.call("post", "/api/auth/refresh", {"refreshToken": stolen})

        assert whoami(victim).status_code == 401
        assert whoami(other).status_code == 200


def test_a_refresh_losing_a_race_is_refused_without_ending_the_session(consumer):
    loser = consumer.tokens["refreshToken"]
    consumer.refresh()

    late = consumer.call("post", "/api/auth/refresh", {"refreshToken": loser})

    assert outcome(late) == (401, "TOKEN_REVOKED")
    assert whoami(consumer).status_code == 200
    assert consumer.refresh().status_code == 200


def test_a_session_ends_at_its_absolute_lifetime_however_often_it_is_refreshed(adapter, settings):
    settings.SESSION_MAX_AGE_SECONDS = 3600
    settings.JWT_ACCESS_TTL_SECONDS = 900
    settings.JWT_REFRESH_TTL_SECONDS = 1800
    client = ApiClient(device_id="d")
    with time_machine.travel(T0, tick=False) as clock:
        client.sign_in("erp")
        for _ in range(3):
            clock.shift(timedelta(minutes=15))
            assert client.refresh().status_code == 200
        # At 09:45 a 30-minute refresh token would run to 10:15; the session ends at 10:00.
        assert client.tokens["refreshTokenExpiresAt"] == "2026-11-21T10:00:00Z"
        assert client.tokens["accessTokenExpiresAt"] == "2026-11-21T10:00:00Z"
        clock.shift(timedelta(minutes=16))  # 10:01: past the session's end

        assert outcome(client.refresh()) == (401, "TOKEN_EXPIRED")
        assert outcome(whoami(client)) == (401, "TOKEN_EXPIRED")


def test_an_expired_access_token_is_401_token_expired_and_refresh_revives_the_pair(
    consumer, settings
):
    with time_machine.travel(datetime.now(UTC)) as clock:
        clock.shift(settings.JWT_ACCESS_TTL_SECONDS + 1)
        assert outcome(whoami(consumer)) == (401, "TOKEN_EXPIRED")
        assert consumer.refresh().status_code == 200
        assert whoami(consumer).status_code == 200


def test_logout_kills_both_tokens_and_can_be_repeated(consumer):
    refresh_token = consumer.tokens["refreshToken"]

    first = consumer.call("post", "/api/auth/logout", {"refreshToken": refresh_token})
    again = consumer.call("post", "/api/auth/logout", {"refreshToken": refresh_token})

    assert (first.status_code, first.json()) == (200, {})
    assert again.status_code == 200
    assert outcome(whoami(consumer)) == (401, "TOKEN_REVOKED")
    assert outcome(consumer.refresh()) == (401, "TOKEN_REVOKED")


def test_logout_needs_a_refresh_token_not_an_access_token(consumer):
    response = consumer.call(
        "post", "/api/auth/logout", {"refreshToken": consumer.tokens["accessToken"]}
    )

    assert outcome(response) == (401, "TOKEN_MALFORMED")
    assert whoami(consumer).status_code == 200


def test_logout_refuses_a_malformed_device_id_and_leaves_the_session_alive(consumer):
    response = consumer.call(
        "post",
        "/api/auth/logout",
        {"refreshToken": consumer.tokens["refreshToken"]},
        HTTP_X_DEVICE_ID="x" * 129,
    )

    assert outcome(response) == (400, "VALIDATION_FAILED")
    assert whoami(consumer).status_code == 200


def test_another_device_id_is_a_device_mismatch_for_access_and_refresh(consumer):
    assert outcome(whoami(consumer, HTTP_X_DEVICE_ID="consumer-2")) == (401, "DEVICE_MISMATCH")
    thief = ApiClient(device_id="consumer-2")
    thief.tokens = dict(consumer.tokens)

    assert outcome(thief.refresh()) == (401, "DEVICE_MISMATCH")
    assert whoami(consumer).status_code == 200  # refused, not revoked


def test_leaving_out_the_device_id_does_not_downgrade_the_binding(consumer):
    unbound = ApiClient()
    unbound.tokens = dict(consumer.tokens)

    assert outcome(whoami(unbound)) == (401, "DEVICE_MISMATCH")


def test_without_device_id_the_session_is_bound_to_user_agent_and_ip(adapter):
    client = ApiClient(HTTP_USER_AGENT="erp-connector/1.0")
    client.sign_in("erp")

    assert whoami(client).status_code == 200
    assert outcome(whoami(client, HTTP_USER_AGENT="curl/8")) == (401, "DEVICE_MISMATCH")
    assert outcome(whoami(client, REMOTE_ADDR="192.0.2.44")) == (401, "DEVICE_MISMATCH")


def test_a_forged_x_forwarded_for_changes_nothing_without_a_trusted_proxy(adapter):
    client = ApiClient(HTTP_USER_AGENT="erp-connector/1.0")
    client.sign_in("erp")

    assert whoami(client, HTTP_X_FORWARDED_FOR="203.0.113.9").status_code == 200


@pytest.mark.parametrize(
    ("remote", "forwarded", "trusted", "expected"),
    [
        ("198.51.100.7", "203.0.113.9", [], "198.51.100.7"),
        ("10.0.0.2", "203.0.113.9", ["10.0.0.0/8"], "203.0.113.9"),
        ("10.0.0.2", "203.0.113.9, 10.0.0.3", ["10.0.0.0/8"], "203.0.113.9"),
        ("10.0.0.2", "6.6.6.6, 203.0.113.9", ["10.0.0.0/8"], "203.0.113.9"),
        ("10.0.0.2", "not-an-ip", ["10.0.0.0/8"], "10.0.0.2"),
        ("10.0.0.2", "", ["10.0.0.0/8"], "10.0.0.2"),
    ],
    ids=[
        "untrusted-socket",
        "trusted-proxy",
        "proxy-chain",
        "client-forgery-left",
        "garbage",
        "no-header",
    ],
)
def test_the_client_ip_believes_x_forwarded_for_only_from_trusted_proxies(
    settings, remote, forwarded, trusted, expected
):
    import ipaddress

    settings.TRUSTED_PROXIES = [ipaddress.ip_network(network) for network in trusted]
    request = RequestFactory().get("/", REMOTE_ADDR=remote, HTTP_X_FORWARDED_FOR=forwarded)

    assert client_ip(request) == expected


def test_disabling_an_account_ends_its_sessions_at_once(consumer, adapter):
    adapter.is_active = False
    adapter.save()

    assert outcome(whoami(consumer)) == (401, "TOKEN_REVOKED")
    assert outcome(consumer.refresh()) == (401, "TOKEN_REVOKED")


def test_no_token_is_401_token_missing_with_a_challenge(adapter):
    response = ApiClient().call("get", "/api/exchange/whoami")

    assert outcome(response) == (401, "TOKEN_MISSING")
    assert response["WWW-Authenticate"] == 'Bearer realm="api"'


@pytest.mark.django_db(transaction=True)
def test_a_refresh_waiting_on_the_row_lock_of_a_rotation_loses_when_it_commits(consumer):
    # The interleaving of two parallel refreshes, forced: a rotation holds the session's row lock
    # while a second refresh of the same token arrives. After the commit the second must lose.
    # (Django writes a joined filter as "pk IN (SELECT ... FROM session)", which PostgreSQL does
    # not re-check after the lock; both refreshes won that way, one run in three.)
    session = Session.objects.get()
    presented = consumer.tokens["refreshToken"]
    result: dict[str, Any] = {}

    def late_refresh() -> None:
        try:
            result["response"] = consumer.call(
                "post", "/api/auth/refresh", {"refreshToken": presented}
            )
        finally:
            connections.close_all()

    with direct_connect() as rotation, direct_connect(autocommit=True) as observer:
        rotation.execute(
            "UPDATE accounts_session SET refresh_jti = gen_random_uuid(),"
            " previous_refresh_jti = refresh_jti, refreshed_at = now() WHERE id = %s",
            [session.pk],
        )
        thread = threading.Thread(target=late_refresh)
        thread.start()
        # Neither PostgreSQL nor the refresh announces that a statement waits on a lock, so
        # pg_stat_activity is polled until a deadline, from a connection of its own: a
        # transaction sees pg_stat_activity as it was at its first read of it.
        deadline = time.monotonic() + 10
        while not observer.execute(
            "SELECT 1 FROM pg_stat_activity WHERE datname = current_database()"
            " AND wait_event_type = 'Lock' AND query LIKE 'UPDATE%%'"
        ).fetchone():
            assert thread.is_alive(), f"the second refresh did not wait: {result}"
            assert time.monotonic() < deadline, "the second refresh never waited on the row lock"
            time.sleep(0.02)
        rotation.commit()
    thread.join(timeout=10)

    assert outcome(result["response"]) == (401, "TOKEN_REVOKED")
    assert Session.objects.get().revoked_at is None


def test_last_used_is_written_by_requests_at_most_once_a_minute(consumer):
    session = Session.objects.get()
    past = session.last_used_at - timedelta(minutes=5)
    Session.objects.filter(pk=session.pk).update(last_used_at=past)

    whoami(consumer)
    touched = Session.objects.get().last_used_at
    whoami(consumer)

    assert touched > past
    assert Session.objects.get().last_used_at == touched


# --- A cabinet user's own sessions -------------------------------------------------------------


def test_the_session_list_marks_the_current_session(ada):
    laptop = signed_in("ada@example.com", device="laptop")
    signed_in("ada@example.com", device="phone")

    sessions = laptop.call("get", "/api/users/sessions").json()["sessions"]

    assert sorted((s["deviceId"], s["current"]) for s in sessions) == [
        ("laptop", True),
        ("phone", False),
    ]
    assert set(sessions[0]) == {
        "sessionId",
        "deviceId",
        "userAgent",
        "ip",
        "createdAt",
        "lastUsedAt",
        "expiresAt",
        "current",
    }


def test_ending_another_of_ones_own_sessions_revokes_its_tokens(ada):
    laptop = signed_in("ada@example.com", device="laptop")
    phone = signed_in("ada@example.com", device="phone")
    sessions = laptop.call("get", "/api/users/sessions").json()["sessions"]
    [phone_session] = [s["sessionId"] for s in sessions if s["deviceId"] == "phone"]

    response = laptop.call("delete", f"/api/users/sessions/{phone_session}")

    assert response.status_code == 200
    assert outcome(phone.call("get", "/api/users/me")) == (401, "TOKEN_REVOKED")
    assert outcome(phone.refresh()) == (401, "TOKEN_REVOKED")
    assert laptop.call("get", "/api/users/me").status_code == 200
    assert [
        s["deviceId"] for s in laptop.call("get", "/api/users/sessions").json()["sessions"]
    ] == ["laptop"]


def test_ending_another_users_session_or_an_unknown_one_is_404(ada, owner):
    mine = signed_in("ada@example.com")
    theirs = signed_in("owner@example.com")
    their_session = Session.objects.get(user=owner).pk

    other = mine.call("delete", f"/api/users/sessions/{their_session}")
    unknown = mine.call("delete", f"/api/users/sessions/{uuid.uuid4()}")

    assert outcome(other) == (404, "NOT_FOUND")
    assert outcome(unknown) == (404, "NOT_FOUND")
    assert theirs.call("get", "/api/users/me").status_code == 200


def test_ending_an_already_ended_session_is_404(ada):
    laptop = signed_in("ada@example.com", device="laptop")
    phone = signed_in("ada@example.com", device="phone")
    phone_session = Session.objects.get(device_id="phone").pk
    assert phone.call("post", "/api/auth/logout", {"refreshToken": phone.tokens["refreshToken"]})

    assert outcome(laptop.call("delete", f"/api/users/sessions/{phone_session}")) == (
        404,
        "NOT_FOUND",
    )
