"""Confirmation codes in the four flows of seed table 3.3 (registration, two-factor sign-in,
two-factor enabling, password reset), and the profile, sessions and allow-list around them
(contract sections 2 and 4)."""

from __future__ import annotations

import hashlib
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest
import time_machine
from django.core import mail
from django.utils import timezone

from accounts import sms
from accounts.models import AuditEvent, Challenge, OutboxMessage, Session, User
from accounts.services.accounts import account_require_password_change
from tests.accounts.api import (
    NEW_PASSWORD,
    PASSWORD,
    SIGNED_IN_FIELDS,
    T0,
    other_code,
    outcome,
    register,
    reset,
    signed_in,
)
from tests.conftest import ApiClient, last_code
from tests.factories import DEFAULT_PASSWORD, UserFactory

pytestmark = pytest.mark.django_db

PHONES = {"a": "+4915123456781", "b": "+4915123456782"}


# --- The four flows, started the same way for every test that runs over them. ------------------


@dataclass
class Pending:
    """A started confirmation: where its code went, and how to confirm and resend it."""

    flow: str
    request_id: str
    address: str
    client: ApiClient
    confirm_path: str
    resend_path: str
    confirm_extra: dict[str, Any] = field(default_factory=dict)
    succeeded: Callable[[Any], bool] = lambda response: False

    def code(self) -> str:
        return last_code(self.address)

    def confirm(self, token: str, request_id: str | None = None) -> Any:
        body = {"requestId": request_id or self.request_id, "token": token, **self.confirm_extra}
        return self.client.call("post", self.confirm_path, body)

    def resend(self) -> Any:
        return self.client.call("post", self.resend_path, {"requestId": self.request_id})


def _login_success(response: Any) -> bool:
    return response.status_code == 200 and list(response.json()) == SIGNED_IN_FIELDS


def start_registration(tag: str) -> Pending:
    email = f"new-{tag}@example.com"
    client = ApiClient(device_id=f"browser-{tag}")
    response = client.call(
        "post",
        "/api/auth/register",
        {"email": email, "password": PASSWORD, "confirmPassword": PASSWORD},
    )
    assert response.status_code == 200, response.json()
    return Pending(
        flow="registration",
        request_id=response.json()["requestId"],
        address=email,
        client=client,
        confirm_path="/api/auth/register/verify-email/confirm",
        resend_path="/api/auth/register/verify-email/resend",
        succeeded=lambda r: _login_success(r) and r.json()["userDto"]["emailConfirmed"] is True,
    )


def start_sign_in(tag: str) -> Pending:
    user = UserFactory.create(
        email=f"two-factor-{tag}@example.com", phone=PHONES[tag], two_factor_enabled=True
    )
    client = ApiClient(device_id=f"browser-{tag}")
    response = client.call(
        "post", "/api/auth/login/email", {"email": user.email, "password": DEFAULT_PASSWORD}
    )
    assert outcome(response) == (428, "TWO_FACTOR_REQUIRED")
    return Pending(
        flow="sign-in",
        request_id=response.json()["requestId"],
        address=user.phone,
        client=client,
        confirm_path="/api/auth/login/two-factor/confirm",
        resend_path="/api/auth/login/two-factor/resend",
        succeeded=_login_success,
    )


def start_enabling(tag: str) -> Pending:
    user = UserFactory.create(email=f"enabling-{tag}@example.com", phone=PHONES[tag])
    client = signed_in(user.email, device=f"browser-{tag}")
    response = client.call("patch", "/api/users/two-factor-authentication")
    assert response.status_code == 200, response.json()
    assert response.json()["confirmMethod"] == "SMS"
    return Pending(
        flow="enabling",
        request_id=response.json()["requestId"],
        address=user.phone,
        client=client,
        confirm_path="/api/users/two-factor-authentication/confirm",
        resend_path="/api/users/two-factor-authentication/resend",
        succeeded=lambda r: r.status_code == 200 and r.json() == {"twoFactorEnabled": True},
    )


def start_reset(tag: str) -> Pending:
    user = UserFactory.create(email=f"forgetful-{tag}@example.com")
    client = ApiClient(device_id=f"browser-{tag}")
    response = client.call("post", "/api/auth/reset-password", {"email": user.email})
    assert response.status_code == 200, response.json()
    return Pending(
        flow="reset",
        request_id=response.json()["requestId"],
        address=user.email,
        client=client,
        confirm_path="/api/auth/reset-password/confirm",
        resend_path="/api/auth/reset-password/resend",
        confirm_extra={"newPassword": NEW_PASSWORD, "confirmPassword": NEW_PASSWORD},
        succeeded=lambda r: r.status_code == 200 and r.json() == {"confirmed": True},
    )


FLOWS: dict[str, Callable[[str], Pending]] = {
    "registration": start_registration,
    "sign-in": start_sign_in,
    "enabling": start_enabling,
    "reset": start_reset,
}

flows = pytest.mark.parametrize("start", list(FLOWS.values()), ids=list(FLOWS))


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


def test_every_flow_sends_its_code_the_way_the_contract_says():
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
    assert resent.json() == {"requestId": pending.request_id, "retryAfterSeconds": 60}
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


# --- Registration --------------------------------------------------------------------------------


def test_registration_answers_200_with_the_challenge_and_emails_a_code():
    response = register("ada@example.com")

    assert response.status_code == 200
    body = response.json()
    assert body == {
        "requestId": body["requestId"],
        "confirmMethod": "EMAIL",
        "retryAfterSeconds": 60,
    }
    user = User.objects.get(email="ada@example.com")
    assert (user.kind, user.email_confirmed, user.is_active) == ("USER", False, True)
    assert user.check_password(PASSWORD)
    assert OutboxMessage.objects.get(to="ada@example.com").template == "registration_code"


@pytest.mark.parametrize(
    "typed", ["owner@example.com", "OWNER@EXAMPLE.COM", "Owner@Example.com"], ids=str
)
def test_registering_a_taken_email_in_any_case_is_409_email_taken(owner, typed):
    response = register(typed)

    assert response.status_code == 409
    assert response.json() == {
        "type": "about:blank",
        "title": "Conflict",
        "status": 409,
        "detail": "An account with this e-mail address already exists: "
        "sign in or reset the password.",
        "code": "EMAIL_TAKEN",
    }
    assert User.objects.filter(email__iexact="owner@example.com").count() == 1
    assert OutboxMessage.objects.count() == 0


def test_with_enumeration_prevention_a_taken_email_gets_the_same_200_and_the_owner_an_email(
    owner, settings, django_capture_on_commit_callbacks
):
    settings.ACCOUNTS_PREVENT_ENUMERATION = True

    with django_capture_on_commit_callbacks(execute=True):
        taken = register("OWNER@example.com")
        fresh = register("fresh@example.com")

    assert taken.status_code == fresh.status_code == 200
    assert list(taken.json()) == list(fresh.json())
    assert taken.json()["confirmMethod"] == fresh.json()["confirmMethod"] == "EMAIL"
    assert taken.json()["retryAfterSeconds"] == fresh.json()["retryAfterSeconds"]
    assert User.objects.filter(email__iexact="owner@example.com").count() == 1
    warned = OutboxMessage.objects.get(template="email_taken")
    assert (warned.to, warned.user, warned.status) == ("owner@example.com", owner, "SENT")
    assert sorted(email.to[0] for email in mail.outbox) == [
        "fresh@example.com",
        "owner@example.com",
    ]
    [owner_mail] = [email for email in mail.outbox if email.to == ["owner@example.com"]]
    assert not re.search(r"\b\d{6}\b", str(owner_mail.body))


def test_with_enumeration_prevention_the_taken_emails_challenge_accepts_no_code(owner, settings):
    settings.ACCOUNTS_PREVENT_ENUMERATION = True
    started = register("owner@example.com").json()
    code = last_code("owner@example.com")

    response = ApiClient().call(
        "post",
        "/api/auth/register/verify-email/confirm",
        {"requestId": started["requestId"], "token": code},
    )

    assert (outcome(response), response.json()["attemptsRemaining"]) == ((400, "CODE_INVALID"), 4)


def test_with_enumeration_prevention_a_weak_password_is_refused_for_a_taken_email_too(
    owner, settings
):
    settings.ACCOUNTS_PREVENT_ENUMERATION = True

    taken, fresh = (
        register("owner@example.com", "password"),
        register("new@example.com", "password"),
    )

    assert outcome(taken) == outcome(fresh) == (400, "VALIDATION_FAILED")
    assert taken.json() == fresh.json()


def test_registration_with_a_confirm_password_mismatch_is_400_on_confirm_password():
    response = register("ada@example.com", PASSWORD, PASSWORD + "!")

    assert outcome(response) == (400, "VALIDATION_FAILED")
    assert list(response.json()["errors"]) == ["confirmPassword"]
    assert not User.objects.filter(email="ada@example.com").exists()


@pytest.mark.parametrize(
    "password",
    ["Sh0rt!", "password", "qwerty123", "12345678901234", "ada.lovelace@example.com"],
    ids=["too-short", "common", "common-with-digits", "only-digits", "like-the-email"],
)
def test_registration_with_a_weak_or_common_password_is_400_on_password(password):
    response = register("ada.lovelace@example.com", password)

    assert outcome(response) == (400, "VALIDATION_FAILED")
    assert list(response.json()["errors"]) == ["password"]
    assert response.json()["errors"]["password"]
    assert not User.objects.exists()


def test_registration_accepts_a_64_character_password():
    password = "x7-" * 21 + "z"
    assert len(password) == 64

    assert register("ada@example.com", password).status_code == 200


@pytest.mark.parametrize(
    "extra",
    [{"isStaff": True}, {"email_confirmed": True}, {"kind": "ADAPTER"}],
    ids=["isStaff", "email_confirmed", "kind"],
)
def test_registration_with_an_unknown_field_is_400_unknown_field(extra):
    response = register("ada@example.com", **extra)

    assert outcome(response) == (400, "UNKNOWN_FIELD")
    assert list(response.json()["errors"]) == list(extra)
    assert not User.objects.exists()


def test_the_registration_code_confirms_the_email_and_signs_in():
    pending = start_registration("a")

    response = pending.confirm(pending.code())

    assert response.status_code == 200
    assert response.json()["userDto"]["emailConfirmed"] is True
    assert response.json()["userDto"]["profileIncompleted"] is True
    user = User.objects.get(email="new-a@example.com")
    assert user.email_confirmed
    assert AuditEvent.objects.filter(user=user, kind="EMAIL_CONFIRMED").count() == 1


# --- Password reset ------------------------------------------------------------------------------


def reset_confirm(request_id: str, token: str, password: str = NEW_PASSWORD, **extra: Any) -> Any:
    body = {
        "requestId": request_id,
        "token": token,
        "newPassword": password,
        "confirmPassword": password,
        **extra,
    }
    return ApiClient().call("post", "/api/auth/reset-password/confirm", body)


def test_reset_password_for_an_unknown_email_answers_the_same_200_and_sends_nothing(
    owner, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        known, unknown = reset("owner@example.com"), reset("nobody@example.com")

    assert known.status_code == unknown.status_code == 200
    assert list(known.json()) == list(unknown.json()) == ["requestId", "retryAfterSeconds"]
    assert known.json()["retryAfterSeconds"] == unknown.json()["retryAfterSeconds"] == 60
    assert [email.to for email in mail.outbox] == [["owner@example.com"]]
    assert OutboxMessage.objects.get(to="nobody@example.com").status == "SKIPPED"


def test_confirming_the_reset_of_an_unknown_email_behaves_like_a_wrong_code(owner):
    known = reset("owner@example.com").json()["requestId"]
    unknown = reset("nobody@example.com").json()["requestId"]
    wrong = other_code(last_code("owner@example.com"))

    known_answers = [reset_confirm(known, wrong).json() for _ in range(6)]
    unknown_answers = [reset_confirm(unknown, wrong).json() for _ in range(6)]

    assert unknown_answers == known_answers
    assert [a["code"] for a in unknown_answers] == ["CODE_INVALID"] * 5 + ["ATTEMPTS_EXCEEDED"]
    assert [a["attemptsRemaining"] for a in unknown_answers] == [4, 3, 2, 1, 0, 0]


def test_confirming_the_reset_of_an_unknown_email_with_its_own_code_fails_too():
    started = reset("nobody@example.com").json()["requestId"]

    response = reset_confirm(started, last_code("nobody@example.com"))

    assert (outcome(response), response.json()["attemptsRemaining"]) == ((400, "CODE_INVALID"), 4)


def test_a_second_reset_within_the_cooldown_answers_with_the_same_challenge(owner, settings):
    settings.ACCOUNTS_CODE_RESEND_SECONDS = 60
    with time_machine.travel(T0, tick=False) as traveller:
        first = reset("owner@example.com").json()
        traveller.shift(timedelta(seconds=15))
        second = reset("Owner@Example.com").json()

    assert second == {"requestId": first["requestId"], "retryAfterSeconds": 45}
    assert OutboxMessage.objects.filter(to="owner@example.com").count() == 1


def test_a_completed_reset_sets_the_password_clears_the_lock_ends_sessions_and_is_audited(owner):
    client = signed_in("owner@example.com")
    for _ in range(5):
        ApiClient().call(
            "post", "/api/auth/login/email", {"email": "owner@example.com", "password": "wrong"}
        )
    locked = ApiClient().call(
        "post",
        "/api/auth/login/email",
        {"email": "owner@example.com", "password": DEFAULT_PASSWORD},
    )
    assert outcome(locked) == (423, "ACCOUNT_LOCKED")
    started = reset("owner@example.com").json()["requestId"]

    response = reset_confirm(started, last_code("owner@example.com"))

    assert response.status_code == 200
    assert response.json() == {"confirmed": True}
    assert outcome(client.call("get", "/api/users/me")) == (401, "TOKEN_REVOKED")
    assert not Session.objects.filter(user=owner, revoked_at__isnull=True).exists()
    assert signed_in("owner@example.com", NEW_PASSWORD).tokens["userDto"]["id"] == owner.pk
    old = ApiClient().call(
        "post",
        "/api/auth/login/email",
        {"email": "owner@example.com", "password": DEFAULT_PASSWORD},
    )
    assert outcome(old) == (401, "BAD_CREDENTIALS")
    assert AuditEvent.objects.filter(user=owner, kind="PASSWORD_RESET").count() == 1


def test_a_completed_reset_clears_expired_credentials_and_the_password_requirement(owner):
    owner.credentials_expire_at = timezone.now() - timedelta(days=1)
    owner.reset_password_required = True
    owner.save()
    started = reset("owner@example.com").json()["requestId"]

    assert reset_confirm(started, last_code("owner@example.com")).status_code == 200

    client = signed_in("owner@example.com", NEW_PASSWORD)
    assert client.tokens["userDto"]["roles"] == ["USER"]
    assert client.tokens["userDto"]["resetPasswordRequired"] is False


def test_a_reset_with_a_confirm_password_mismatch_is_400_and_spends_no_attempt(owner):
    started = reset("owner@example.com").json()["requestId"]

    response = reset_confirm(
        started, last_code("owner@example.com"), confirmPassword=NEW_PASSWORD + "!"
    )

    assert outcome(response) == (400, "VALIDATION_FAILED")
    assert list(response.json()["errors"]) == ["confirmPassword"]
    assert Challenge.objects.get(pk=started).attempts_left == 5
    assert Challenge.objects.get(pk=started).used_at is None


@pytest.mark.parametrize("password", ["password", "short", "owner@example.com"], ids=str)
def test_a_reset_to_a_weak_password_is_400_on_new_password_and_keeps_the_old_one(owner, password):
    started = reset("owner@example.com").json()["requestId"]

    response = reset_confirm(started, last_code("owner@example.com"), password)

    assert outcome(response) == (400, "VALIDATION_FAILED")
    assert list(response.json()["errors"]) == ["newPassword"]
    owner.refresh_from_db()
    assert owner.check_password(DEFAULT_PASSWORD)


def test_reset_password_with_an_unknown_field_is_400_unknown_field(owner):
    response = ApiClient().call(
        "post", "/api/auth/reset-password", {"email": "owner@example.com", "username": "owner"}
    )

    assert outcome(response) == (400, "UNKNOWN_FIELD")
    assert OutboxMessage.objects.count() == 0


# --- Profile and two-factor enabling -------------------------------------------------------------


@pytest.fixture
def ada(db: Any) -> User:
    return UserFactory.create(username="ada", email="ada@example.com", phone="")


def test_enabling_two_factor_without_a_phone_is_400_phone_required(ada):
    client = signed_in("ada@example.com")

    response = client.call("patch", "/api/users/two-factor-authentication")

    assert outcome(response) == (400, "PHONE_REQUIRED")
    assert Challenge.objects.count() == 0


def test_enabling_two_factor_when_it_is_on_is_409():
    pending = start_enabling("a")
    assert pending.succeeded(pending.confirm(pending.code()))

    response = pending.client.call("patch", "/api/users/two-factor-authentication")

    assert outcome(response) == (409, "TWO_FACTOR_ALREADY_ENABLED")


def test_a_confirmed_enabling_turns_two_factor_on_and_is_audited():
    pending = start_enabling("a")

    response = pending.confirm(pending.code())

    assert response.json() == {"twoFactorEnabled": True}
    user = User.objects.get(phone=PHONES["a"])
    assert user.two_factor_enabled
    assert AuditEvent.objects.filter(user=user, kind="TWO_FACTOR_ENABLED").count() == 1
    assert pending.client.call("get", "/api/users/me").json()["twoFactorEnabled"] is True


def test_disabling_two_factor_turns_it_off_and_queues_an_email(django_capture_on_commit_callbacks):
    user = UserFactory.create(email="ada@example.com", phone=PHONES["a"], two_factor_enabled=True)
    client = ApiClient(device_id="browser")
    with django_capture_on_commit_callbacks(execute=True):
        started = client.call(
            "post",
            "/api/auth/login/email",
            {"email": "ada@example.com", "password": DEFAULT_PASSWORD},
        ).json()
    client.tokens = client.call(
        "post",
        "/api/auth/login/two-factor/confirm",
        {"requestId": started["requestId"], "token": re.findall(r"\d{6}", sms.outbox[-1][1])[0]},
    ).json()

    response = client.call("delete", "/api/users/two-factor-authentication")

    assert response.status_code == 200
    assert response.json() == {"twoFactorEnabled": False}
    user.refresh_from_db()
    assert user.two_factor_enabled is False
    assert list(
        OutboxMessage.objects.filter(to="ada@example.com").values_list("template", flat=True)
    ) == ["two_factor_disabled"]
    assert AuditEvent.objects.filter(user=user, kind="TWO_FACTOR_DISABLED").count() == 1
    signed_in("ada@example.com")  # no 428 any more


def test_changing_the_phone_stores_e164_and_queues_a_phone_changed_email(ada):
    client = signed_in("ada@example.com")

    response = client.call("patch", "/api/users/me", {"phone": "+49 (151) 2345-6781"})

    assert response.status_code == 200
    assert response.json()["phone"] == PHONES["a"]
    message = OutboxMessage.objects.get(to="ada@example.com")
    assert message.template == "phone_changed"
    assert PHONES["a"] in message.text
    assert AuditEvent.objects.filter(user=ada, kind="PHONE_CHANGED").count() == 1


def test_saving_the_same_phone_again_sends_no_email(ada):
    ada.phone = PHONES["a"]
    ada.save()
    client = signed_in("ada@example.com")

    response = client.call("patch", "/api/users/me", {"phone": PHONES["a"], "firstName": "Augusta"})

    assert response.json()["firstName"] == "Augusta"
    assert OutboxMessage.objects.count() == 0


@pytest.mark.parametrize("phone", ["12345", "not a phone", "+49 0000", "+1 555 0100 999 999 9"])
def test_an_invalid_phone_is_400_on_phone(ada, phone):
    client = signed_in("ada@example.com")

    response = client.call("patch", "/api/users/me", {"phone": phone, "firstName": "Augusta"})

    assert outcome(response) == (400, "VALIDATION_FAILED")
    assert list(response.json()["errors"]) == ["phone"]
    ada.refresh_from_db()
    assert (ada.phone, ada.first_name) == ("", "Ada")


@pytest.mark.parametrize(
    "body",
    [{"email": "evil@example.com"}, {"twoFactorEnabled": True}, {"is_staff": True}],
    ids=["email", "twoFactorEnabled", "is_staff"],
)
def test_profile_update_with_an_unknown_field_is_400_unknown_field(ada, body):
    client = signed_in("ada@example.com")

    response = client.call("patch", "/api/users/me", {"firstName": "Augusta", **body})

    assert outcome(response) == (400, "UNKNOWN_FIELD")
    ada.refresh_from_db()
    assert (ada.first_name, ada.email, ada.two_factor_enabled, ada.is_staff) == (
        "Ada",
        "ada@example.com",
        False,
        False,
    )


def test_the_profile_update_completes_the_profile(ada):
    client = signed_in("ada@example.com")
    assert client.tokens["userDto"]["profileIncompleted"] is True

    response = client.call("patch", "/api/users/me", {"phone": PHONES["a"]})

    assert response.json()["profileIncompleted"] is False


# --- Sessions ------------------------------------------------------------------------------------


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


# --- USER_PASSWORD_RESET_REQUIRED and adapters ---------------------------------------------------

FORBIDDEN_WHILE_RESET_REQUIRED = [
    ("get", "/api/users/sessions", None),
    ("get", "/api/users/adapters", None),
    ("post", "/api/users/adapters", {}),
    ("patch", "/api/users/me", {"firstName": "Augusta"}),
    ("patch", "/api/users/two-factor-authentication", None),
    ("delete", "/api/users/two-factor-authentication", None),
]


@pytest.fixture(params=["token-issued-before-the-flag", "token-issued-after-the-flag"])
def must_change_password(request: Any, ada: User) -> ApiClient:
    if request.param == "token-issued-before-the-flag":
        client = signed_in("ada@example.com")
        account_require_password_change(user=ada, actor=None)
    else:
        account_require_password_change(user=ada, actor=None)
        client = signed_in("ada@example.com")
        assert client.tokens["userDto"]["roles"] == ["USER_PASSWORD_RESET_REQUIRED"]
    return client


@pytest.mark.parametrize(
    ("method", "path", "body"),
    FORBIDDEN_WHILE_RESET_REQUIRED,
    ids=[f"{m} {p}" for m, p, _ in FORBIDDEN_WHILE_RESET_REQUIRED],
)
def test_a_user_who_must_change_the_password_gets_403_outside_the_allow_list(
    must_change_password, method, path, body
):
    response = must_change_password.call(method, path, body)

    assert outcome(response) == (403, "PASSWORD_CHANGE_REQUIRED")
    assert User.objects.get(username="ada").first_name == "Ada"


def test_a_user_who_must_change_the_password_may_read_the_profile(must_change_password):
    response = must_change_password.call("get", "/api/users/me")

    assert response.status_code == 200
    assert response.json()["resetPasswordRequired"] is True


def test_a_user_who_must_change_the_password_may_refresh_and_gets_the_restricted_role(
    must_change_password,
):
    assert must_change_password.refresh().status_code == 200

    assert must_change_password.call("get", "/api/users/me").json()["roles"] == [
        "USER_PASSWORD_RESET_REQUIRED"
    ]
    assert outcome(must_change_password.call("get", "/api/users/sessions")) == (
        403,
        "PASSWORD_CHANGE_REQUIRED",
    )


def test_a_user_who_must_change_the_password_may_log_out(must_change_password):
    refresh_token = must_change_password.tokens["refreshToken"]

    response = must_change_password.call(
        "post", "/api/auth/logout", {"refreshToken": refresh_token}
    )

    assert response.status_code == 200
    assert outcome(must_change_password.call("get", "/api/users/me")) == (401, "TOKEN_REVOKED")


def test_changing_the_password_lifts_the_requirement(must_change_password):
    response = must_change_password.call(
        "patch",
        "/api/users/change-password",
        {
            "currentPassword": DEFAULT_PASSWORD,
            "newPassword": NEW_PASSWORD,
            "confirmPassword": NEW_PASSWORD,
        },
    )

    assert response.status_code == 200, response.json()
    assert response.json()["userDto"]["roles"] == ["USER"]
    assert response.json()["userDto"]["resetPasswordRequired"] is False
    must_change_password.tokens = response.json()
    assert must_change_password.call("get", "/api/users/sessions").status_code == 200


ADAPTER_FORBIDDEN = [
    ("get", "/api/users/me", None),
    ("patch", "/api/users/me", {"firstName": "x"}),
    ("patch", "/api/users/change-password", {"currentPassword": "x"}),
    ("get", "/api/users/sessions", None),
    ("get", "/api/users/adapters", None),
    ("patch", "/api/users/two-factor-authentication", None),
    ("post", "/api/users/two-factor-authentication/confirm", None),
]


@pytest.mark.parametrize(
    ("method", "path", "body"), ADAPTER_FORBIDDEN, ids=[f"{m} {p}" for m, p, _ in ADAPTER_FORBIDDEN]
)
def test_adapters_get_403_on_the_users_api(consumer, method, path, body):
    response = consumer.call(method, path, body)

    assert response.status_code == 403
    assert response["Content-Type"] == "application/problem+json"
    assert response.json()["code"] == "PERMISSION_DENIED"


def test_an_adapter_owner_flagged_for_a_password_change_does_not_restrict_the_adapter(
    owner, adapter, consumer
):
    account_require_password_change(user=owner, actor=None)

    response = consumer.call("get", "/api/exchange/messages?waitSeconds=0")

    assert response.status_code == 200, response.json()


# --- Changing the password -----------------------------------------------------------------------


def change_password(client: ApiClient, current: str, new: str = NEW_PASSWORD) -> Any:
    return client.call(
        "patch",
        "/api/users/change-password",
        {"currentPassword": current, "newPassword": new, "confirmPassword": new},
    )


def test_a_wrong_current_password_is_400_on_current_password(ada):
    client = signed_in("ada@example.com")

    response = change_password(client, "wrong password")

    assert outcome(response) == (400, "VALIDATION_FAILED")
    assert response.json()["errors"] == {"currentPassword": ["The current password is wrong."]}
    ada.refresh_from_db()
    assert ada.check_password(DEFAULT_PASSWORD)


def test_five_wrong_current_passwords_lock_the_account(ada):
    client = signed_in("ada@example.com")

    wrong = [change_password(client, "wrong password") for _ in range(5)]
    sixth = change_password(client, DEFAULT_PASSWORD)

    assert [outcome(r) for r in wrong] == [(400, "VALIDATION_FAILED")] * 5
    assert outcome(sixth) == (423, "ACCOUNT_LOCKED")
    assert "lockedUntil" in sixth.json()
    sign_in = ApiClient().call(
        "post", "/api/auth/login/email", {"email": "ada@example.com", "password": DEFAULT_PASSWORD}
    )
    assert outcome(sign_in) == (423, "ACCOUNT_LOCKED")
    ada.refresh_from_db()
    assert ada.check_password(DEFAULT_PASSWORD)


def test_a_password_change_ends_the_other_sessions_and_keeps_this_device_signed_in(ada):
    laptop = signed_in("ada@example.com", device="laptop")
    phone = signed_in("ada@example.com", device="phone")

    response = change_password(laptop, DEFAULT_PASSWORD)

    assert response.status_code == 200
    assert outcome(phone.call("get", "/api/users/me")) == (401, "TOKEN_REVOKED")
    assert outcome(laptop.call("get", "/api/users/me")) == (401, "TOKEN_REVOKED")
    laptop.tokens = response.json()
    assert laptop.call("get", "/api/users/me").status_code == 200
    assert AuditEvent.objects.filter(user=ada, kind="PASSWORD_CHANGED").count() == 1


def test_a_password_change_to_a_weak_or_mismatched_password_is_400(ada):
    client = signed_in("ada@example.com")

    weak = change_password(client, DEFAULT_PASSWORD, "password")
    mismatch = client.call(
        "patch",
        "/api/users/change-password",
        {
            "currentPassword": DEFAULT_PASSWORD,
            "newPassword": NEW_PASSWORD,
            "confirmPassword": PASSWORD,
        },
    )

    assert (outcome(weak), list(weak.json()["errors"])) == (
        (400, "VALIDATION_FAILED"),
        ["newPassword"],
    )
    assert (outcome(mismatch), list(mismatch.json()["errors"])) == (
        (400, "VALIDATION_FAILED"),
        ["confirmPassword"],
    )
    assert client.call("get", "/api/users/me").status_code == 200
