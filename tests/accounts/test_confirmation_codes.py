"""Confirmation codes in the four flows (registration, two-factor sign-in, turning two-factor
sign-in on, password reset): six digits stored as a keyed hash, each working once, only for its
own requestId and flow, within its attempt budget, expiry and resend cooldown (docs/sessions.md,
"Confirmation codes").
"""

from __future__ import annotations

import hashlib
import re
import uuid
from datetime import timedelta

import pytest
import time_machine
from django.core import mail
from django.utils import timezone

from accounts.models import Challenge, OutboxMessage, User
from tests.accounts.api import T0, other_code, outcome
from tests.accounts.confirmations import (
    FLOWS,
    PHONES,
    flows,
    start_enabling,
    start_reset,
    start_sign_in,
)
from tests.conftest import ApiClient

pytestmark = pytest.mark.django_db


@flows
def test_a_flow_starts_with_a_six_digit_code_stored_only_as_a_keyed_hash(start):
    pending = start("a")
    code = pending.code()

    assert re.fullmatch(r"\d{6}", code)
    challenge = Challenge.objects.get(pk=pending.request_id)
    assert re.fullmatch(r"[0-9a-f]{64}", challenge.code_hash)
    assert code not in challenge.code_hash
    unkeyed = [code, f"{challenge.pk}:{code}"]
    assert challenge.code_hash not in [hashlib.sha256(v.encode()).hexdigest() for v in unkeyed]
    stored = Challenge.objects.filter(pk=pending.request_id).values(
        "code_hash", "address", "device_key"
    )
    assert code not in str(list(stored))


def test_each_flow_sends_its_code_by_its_method_to_its_address():
    methods = {}
    for tag, (name, start) in zip(["a", "b", "a", "b"], FLOWS.items(), strict=True):
        pending = start(tag)
        challenge = Challenge.objects.get(pk=pending.request_id)
        methods[name] = (challenge.purpose, challenge.method, challenge.address)

    assert methods == {
        "registration": ("REGISTRATION", "EMAIL", "new-a@example.com"),
        "sign-in": ("SIGN_IN", "SMS", PHONES["b"]),
        "enabling": ("ENABLE_TWO_FACTOR", "SMS", PHONES["a"]),
        "reset": ("PASSWORD_RESET", "EMAIL", "forgetful-b@example.com"),
    }


def test_a_sent_code_is_gone_from_the_outbox_once_delivered(django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        pending = start_reset("a")

    message = OutboxMessage.objects.get(to=pending.address)
    assert message.status == "SENT"
    assert (message.text, message.html) == ("", "")
    [email] = mail.outbox
    assert re.search(r"\b\d{6}\b", str(email.body))


@flows
def test_wrong_codes_count_down_then_429_and_the_right_code_no_longer_works(start):
    pending = start("a")
    right = pending.code()

    wrong = [pending.confirm(other_code(right)) for _ in range(5)]
    after = pending.confirm(other_code(right))
    too_late = pending.confirm(right)

    assert [outcome(r) for r in wrong] == [(400, "CODE_INVALID")] * 5
    assert [r.json()["attemptsRemaining"] for r in wrong] == [4, 3, 2, 1, 0]
    assert wrong[0].json() == {
        "type": "about:blank",
        "title": "Bad Request",
        "status": 400,
        "detail": "The code is wrong.",
        "code": "CODE_INVALID",
        "attemptsRemaining": 4,
    }
    assert after.status_code == 429
    assert after.json() == {
        "type": "about:blank",
        "title": "Too Many Requests",
        "status": 429,
        "detail": "Too many wrong codes: this confirmation is closed; start again.",
        "code": "ATTEMPTS_EXCEEDED",
        "attemptsRemaining": 0,
    }
    assert outcome(too_late) == (429, "ATTEMPTS_EXCEEDED")
    assert Challenge.objects.get(pk=pending.request_id).attempts_left == 0


@flows
def test_the_attempt_budget_follows_the_setting(start, settings):
    settings.ACCOUNTS_CODE_ATTEMPTS = 2
    pending = start("a")
    wrong = other_code(pending.code())

    statuses = [outcome(pending.confirm(wrong)) for _ in range(3)]

    assert statuses == [(400, "CODE_INVALID"), (400, "CODE_INVALID"), (429, "ATTEMPTS_EXCEEDED")]


@flows
def test_an_expired_code_is_400_code_expired_and_spends_an_attempt(start):
    pending = start("a")
    right = pending.code()
    Challenge.objects.filter(pk=pending.request_id).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )

    first = pending.confirm(right)
    second = pending.confirm(other_code(right))

    assert outcome(first) == (400, "CODE_EXPIRED")
    assert first.json()["attemptsRemaining"] == 4
    assert first.json()["detail"] == "The code has expired: ask for a new one with resend."
    assert (outcome(second), second.json()["attemptsRemaining"]) == ((400, "CODE_EXPIRED"), 3)


@flows
def test_a_code_expires_after_the_ttl(start, settings):
    settings.ACCOUNTS_CODE_TTL_SECONDS = 600
    with time_machine.travel(T0, tick=False) as traveller:
        pending = start("a")
        traveller.shift(timedelta(seconds=601))

        response = pending.confirm(pending.code())

    assert outcome(response) == (400, "CODE_EXPIRED")


@flows
def test_the_right_code_works_once(start):
    pending = start("a")
    code = pending.code()

    first = pending.confirm(code)
    second = pending.confirm(code)

    assert pending.succeeded(first), first.json()
    assert outcome(second) == (400, "CODE_INVALID")
    assert Challenge.objects.get(pk=pending.request_id).used_at is not None


@flows
def test_a_code_is_refused_for_another_request_id_of_the_same_flow(start):
    mine, theirs = start("a"), start("b")
    my_code, their_code = mine.code(), theirs.code()
    while their_code == my_code:  # one chance in a million: draw theirs again
        Challenge.objects.filter(pk=theirs.request_id).update(
            sent_at=timezone.now() - timedelta(hours=1)
        )
        assert theirs.resend().status_code == 200
        their_code = theirs.code()

    response = mine.confirm(their_code)

    assert outcome(response) == (400, "CODE_INVALID")
    assert response.json()["attemptsRemaining"] == 4
    assert mine.succeeded(mine.confirm(my_code))
    assert theirs.succeeded(theirs.confirm(their_code))


@pytest.mark.parametrize(
    ("issued_by", "confirmed_at"),
    [(a, b) for a in FLOWS for b in FLOWS if a != b],
    ids=[f"{a}-code-at-{b}-confirm" for a in FLOWS for b in FLOWS if a != b],
)
def test_a_code_of_one_flow_is_refused_by_another_flows_confirm(issued_by, confirmed_at):
    issued, elsewhere = FLOWS[issued_by]("a"), FLOWS[confirmed_at]("b")
    code = issued.code()

    response = elsewhere.confirm(code, request_id=issued.request_id)

    assert outcome(response) == (400, "CODE_INVALID")
    assert Challenge.objects.get(pk=issued.request_id).used_at is None
    assert issued.succeeded(issued.confirm(code))


def test_an_unknown_request_id_is_a_wrong_code():
    response = ApiClient().call(
        "post",
        "/api/auth/login/two-factor/confirm",
        {"requestId": str(uuid.uuid4()), "token": "123456"},
    )

    assert outcome(response) == (400, "CODE_INVALID")


def test_another_users_enabling_challenge_cannot_be_confirmed_with_its_code():
    mine, theirs = start_enabling("a"), start_enabling("b")

    response = mine.confirm(theirs.code(), request_id=theirs.request_id)

    assert outcome(response) == (400, "CODE_INVALID")
    assert not User.objects.get(phone=PHONES["b"]).two_factor_enabled
    # Nobody spends another user's attempts.
    assert Challenge.objects.get(pk=theirs.request_id).attempts_left == 5
    assert theirs.succeeded(theirs.confirm(theirs.code()))


SIGN_IN_ONLY = {"confirmMethod", "otherMethods"}


@flows
def test_resend_after_the_cooldown_sends_a_new_code_that_replaces_the_old_one(start, settings):
    settings.ACCOUNTS_CODE_RESEND_SECONDS = 60
    with time_machine.travel(T0, tick=False) as traveller:
        pending = start("a")
        old = pending.code()
        traveller.shift(timedelta(seconds=61))

        resent = pending.resend()
        new = pending.code()
        with_old = pending.confirm(old) if old != new else None
        with_new = pending.confirm(new)

    assert resent.status_code == 200
    # A sign-in's resend also says what it asks for and what it may switch to.
    answer = {name: value for name, value in resent.json().items() if name not in SIGN_IN_ONLY}
    assert answer == {"requestId": pending.request_id, "retryAfterSeconds": 60}
    if start is start_sign_in:
        assert (resent.json()["confirmMethod"], resent.json()["otherMethods"]) == ("SMS", [])
    assert re.fullmatch(r"\d{6}", new)
    if with_old is not None:
        assert outcome(with_old) == (400, "CODE_INVALID")
    assert pending.succeeded(with_new), with_new.json()


@flows
def test_resend_too_early_is_429_with_retry_after(start, settings):
    settings.ACCOUNTS_CODE_RESEND_SECONDS = 60
    with time_machine.travel(T0, tick=False) as traveller:
        pending = start("a")
        sent = OutboxMessage.objects.count()
        traveller.shift(timedelta(seconds=20))

        response = pending.resend()

    assert response.status_code == 429
    assert response.json() == {
        "type": "about:blank",
        "title": "Too Many Requests",
        "status": 429,
        "detail": "A code was sent moments ago: wait retryAfterSeconds before asking again.",
        "code": "RESEND_TOO_EARLY",
        "retryAfterSeconds": 40,
    }
    assert response["Retry-After"] == "40"
    assert response["Cache-Control"] == "no-store"
    assert OutboxMessage.objects.count() == sent


@flows
def test_resend_keeps_the_attempt_budget(start, settings):
    settings.ACCOUNTS_CODE_RESEND_SECONDS = 0
    pending = start("a")
    for _ in range(3):
        pending.confirm(other_code(pending.code()))

    assert pending.resend().status_code == 200
    response = pending.confirm(other_code(pending.code()))

    assert response.json()["attemptsRemaining"] == 1


@flows
def test_resend_of_a_spent_challenge_is_429_attempts_exceeded(start, settings):
    settings.ACCOUNTS_CODE_RESEND_SECONDS = 0
    pending = start("a")
    for _ in range(5):
        pending.confirm(other_code(pending.code()))

    assert outcome(pending.resend()) == (429, "ATTEMPTS_EXCEEDED")


@flows
def test_resend_of_a_used_or_unknown_challenge_is_404(start, settings):
    settings.ACCOUNTS_CODE_RESEND_SECONDS = 0
    pending = start("a")
    assert pending.succeeded(pending.confirm(pending.code()))

    used = pending.resend()
    unknown = pending.client.call("post", pending.resend_path, {"requestId": str(uuid.uuid4())})

    assert outcome(used) == (404, "NOT_FOUND")
    assert outcome(unknown) == (404, "NOT_FOUND")


@flows
def test_confirm_with_an_unknown_field_is_400_unknown_field(start):
    pending = start("a")

    response = pending.client.call(
        "post",
        pending.confirm_path,
        {"requestId": pending.request_id, "token": pending.code(), "admin": True},
    )

    assert outcome(response) == (400, "UNKNOWN_FIELD")
    assert response.json()["errors"] == {"admin": ["This field is not accepted."]}
    assert Challenge.objects.get(pk=pending.request_id).attempts_left == 5
