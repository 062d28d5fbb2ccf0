"""Password reset, sign-in and registration do not tell whether an account exists: an unknown
address or login gets the same status, the same body and the same work as a known one
(docs/sessions.md, "Signing in", and "Confirmation codes": nothing tells whether an account
exists). Registration says EMAIL_TAKEN unless ACCOUNTS_PREVENT_ENUMERATION is on.

The work is compared without a clock: the same password hashing (algorithm and parameters, from
the real hasher), the same SQL statements and the same tasks queued. The time it takes lives in
bench/enumeration.py (docs/performance.md): wall-clock assertions fail on a busy machine.
"""

from __future__ import annotations

import re
from collections import Counter
from datetime import timedelta
from typing import Any

import pytest
import time_machine
from django.core import mail

from accounts.models import Challenge, OutboxMessage, User
from tests.accounts.api import (
    T0,
    by_email,
    by_username,
    other_code,
    outcome,
    register,
    reset,
    reset_confirm,
)
from tests.conftest import ApiClient, last_code
from tests.enumeration import ARGON2_CONFIGURED
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

KNOWN = "ada@example.com"
UNKNOWN = "nobody@example.com"


@pytest.fixture(autouse=True)
def _ada(db: Any) -> None:
    UserFactory.create(username="ada", email=KNOWN)


def sign_in(email: str) -> Any:
    return by_email(email, "wrong password")


def without_request_id(body: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in body.items() if key != "requestId"}


def test_reset_password_answers_known_and_unknown_emails_alike_and_mails_only_the_known(
    settings, django_capture_on_commit_callbacks
):
    settings.ACCOUNTS_CODE_RESEND_SECONDS = 60

    with django_capture_on_commit_callbacks(execute=True):
        known, unknown = reset(KNOWN), reset(UNKNOWN)
        known_again, unknown_again = reset(KNOWN), reset(UNKNOWN)

    assert known.status_code == unknown.status_code == 200
    assert known["Content-Type"] == unknown["Content-Type"]
    assert list(known.json()) == list(unknown.json()) == ["requestId", "retryAfterSeconds"]
    assert without_request_id(known.json()) == without_request_id(unknown.json())
    assert known.json()["retryAfterSeconds"] == 60
    # Within the cooldown both answer with their pending challenge, counting down alike.
    assert known_again.json()["requestId"] == known.json()["requestId"]
    assert unknown_again.json()["requestId"] == unknown.json()["requestId"]
    assert known_again.json()["retryAfterSeconds"] == unknown_again.json()["retryAfterSeconds"]
    assert Challenge.objects.filter(user__isnull=True).count() == 1
    # The unknown address's e-mail is queued like the known one's, and skipped when sent.
    assert [email.to for email in mail.outbox] == [[KNOWN]]
    assert OutboxMessage.objects.get(to=UNKNOWN).status == "SKIPPED"


def test_sign_in_answers_known_and_unknown_emails_alike():
    known, unknown = sign_in(KNOWN), sign_in(UNKNOWN)

    assert known.status_code == unknown.status_code == 401
    assert known.json() == unknown.json()
    assert known.json()["code"] == "BAD_CREDENTIALS"
    assert known["Content-Type"] == unknown["Content-Type"]


# A wrong password for an account, and a password for an identifier nobody has, each way in.
known_and_unknown = pytest.mark.parametrize(
    ("request_", "known", "unknown"),
    [(by_username, "erp", "ghost"), (by_email, KNOWN, UNKNOWN)],
    ids=["by-login", "by-email"],
)


@pytest.mark.real_hashing
@known_and_unknown
def test_an_unknown_account_costs_the_same_password_hashing_as_a_wrong_password(
    adapter, work_of, request_, known, unknown
):
    known_work = work_of(lambda: request_(known, "wrong password"))
    unknown_work = work_of(lambda: request_(unknown, "wrong password"))

    assert known_work.status == unknown_work.status == 401
    assert [hashing.operation for hashing in known_work.hashing] == ["verify"]  # the stored hash
    assert [hashing.operation for hashing in unknown_work.hashing] == ["encode"]  # a throwaway one
    assert known_work.hashing_costs == unknown_work.hashing_costs  # every Argon2 parameter alike
    assert [hashing.configuration for hashing in unknown_work.hashing] == [ARGON2_CONFIGURED]


@known_and_unknown
def test_an_unknown_account_runs_the_same_statements_as_a_wrong_password_up_to_the_lock(
    adapter, settings, work_of, request_, known, unknown
):
    settings.ACCOUNTS_LOCKOUT_THRESHOLD = 2  # a first failure, the locking one, then locked
    known_work = [work_of(lambda: request_(known, "wrong password")) for _ in range(3)]
    unknown_work = [work_of(lambda: request_(unknown, "wrong password")) for _ in range(3)]

    assert [work.status for work in known_work] == [401, 401, 423]
    assert [work.status for work in unknown_work] == [401, 401, 423]
    for known_attempt, unknown_attempt in zip(known_work, unknown_work, strict=True):
        assert known_attempt.statements == unknown_attempt.statements
        assert known_attempt.on_commit == unknown_attempt.on_commit
    # The locking attempt by e-mail queues the notice of the lock: to the owner, or, for an
    # unknown address, to nobody (skipped when sent, like a reset for an unknown address). An
    # adapter (the login here) has no address to tell.
    notices = [0, 1, 0] if request_ is by_email else [0, 0, 0]
    assert [len(work.on_commit) for work in known_work] == notices


def test_unknown_identifiers_lock_the_same_way_so_423_reveals_nothing(adapter):
    ghost = [by_username("ghost", "wrong") for _ in range(6)]
    real = [by_username("erp", "wrong") for _ in range(6)]

    assert [r.status_code for r in ghost] == [r.status_code for r in real] == [401] * 5 + [423]
    assert set(ghost[-1].json()) == set(real[-1].json())


def test_reset_password_does_the_same_work_for_an_unknown_email_as_for_a_known_one(
    settings, work_of
):
    settings.ACCOUNTS_CODE_RESEND_SECONDS = 60
    # A new challenge and its e-mail in the outbox, then the pending one within the cooldown.
    known = [work_of(lambda: reset(KNOWN)) for _ in range(2)]
    unknown = [work_of(lambda: reset(UNKNOWN)) for _ in range(2)]

    assert [work.status for work in known] == [work.status for work in unknown] == [200, 200]
    for known_request, unknown_request in zip(known, unknown, strict=True):
        assert known_request.hashing == unknown_request.hashing == []  # no password is hashed
        assert known_request.statements == unknown_request.statements
    started, pending = known
    assert started.on_commit == unknown[0].on_commit == ["_publish_on_commit.<locals>.publish"]
    assert pending.on_commit == unknown[1].on_commit == []
    # One e-mail each in the outbox; the worker skips the unknown one's after the answer.
    assert sorted(OutboxMessage.objects.values_list("to", flat=True)) == [KNOWN, UNKNOWN]


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


def test_with_enumeration_prevention_registrations_of_a_taken_email_mail_its_owner_once_a_cooldown(
    owner, settings, django_capture_on_commit_callbacks
):
    settings.ACCOUNTS_PREVENT_ENUMERATION = True
    settings.ACCOUNTS_CODE_RESEND_SECONDS = 60
    # Many addresses and clients, as a mail-bomber would use: rate limits are not what stops it.
    settings.ACCOUNTS_RATE_LIMIT_IP = settings.ACCOUNTS_RATE_LIMIT_ACCOUNT = "10000/m"

    with (
        time_machine.travel(T0, tick=False) as clock,
        django_capture_on_commit_callbacks(execute=True),
    ):
        bombing = [register(email) for email in ["owner@example.com", "OWNER@example.com"] * 25]
        clock.shift(timedelta(seconds=59))
        still = register("owner@example.com")
        clock.shift(timedelta(seconds=2))  # the cooldown since the first e-mail is over
        later = register("Owner@Example.com")

    assert {outcome(response) for response in [*bombing, still, later]} == {(200, "")}
    assert [email.to for email in mail.outbox] == [["owner@example.com"]] * 2
    # Each throttled registration wrote the same e-mail for nobody, skipped when sent.
    statuses = Counter(OutboxMessage.objects.filter(template="email_taken").values_list("status"))
    assert statuses == {("SENT",): 2, ("SKIPPED",): 50}


@pytest.mark.real_hashing
def test_with_enumeration_prevention_a_throttled_owners_email_changes_neither_answer_nor_work(
    owner, settings, work_of
):
    settings.ACCOUNTS_PREVENT_ENUMERATION = True
    settings.ACCOUNTS_CODE_RESEND_SECONDS = 60
    answers: list[Any] = []

    def registering(email: str) -> Any:
        answers.append(register(email))
        return answers[-1]

    with time_machine.travel(T0, tick=False):
        fresh = work_of(lambda: registering("fresh@example.com"))
        told = work_of(lambda: registering("owner@example.com"))
        throttled = work_of(lambda: registering("owner@example.com"))

    assert fresh.status == told.status == throttled.status == 200
    fresh_body, told_body, throttled_body = (answer.json() for answer in answers)
    assert without_request_id(told_body) == without_request_id(throttled_body)
    assert without_request_id(told_body) == without_request_id(fresh_body)
    assert told_body["requestId"] != throttled_body["requestId"]
    # One password hashed with the configured Argon2 whichever the address.
    assert [hashing.configuration for hashing in told.hashing] == [ARGON2_CONFIGURED]
    assert fresh.hashing_costs == told.hashing_costs == throttled.hashing_costs
    assert told.statements == throttled.statements
    assert told.on_commit == throttled.on_commit == ["_publish_on_commit.<locals>.publish"] * 2
    owner_mails = OutboxMessage.objects.filter(template="email_taken").order_by("pk")
    assert [(mail.user, mail.requires_account) for mail in owner_mails] == [
        (owner, False),
        (None, True),
    ]


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
