"""The second step of a cabinet sign-in (/login/two-factor) when the person holds a passkey, with
Django's test client and a software authenticator: the passkey asked for and its answer signing
in, a refused answer that loses nothing, a recovery code in its place, and the buttons that switch
the sign-in to another factor and back. Chromium's own ceremony is tests/browser/test_passkeys.py's."""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

import pyotp
import pytest
from django.test import Client

from accounts.device_tokens import DEVICE_TOKEN_COOKIE
from accounts.models import Challenge, OutboxMessage, Passkey, User
from tests.authenticator import SoftAuthenticator
from tests.cabinet.passkeys import ORIGIN, added, text
from tests.conftest import last_code
from tests.factories import DEFAULT_PASSWORD

pytestmark = pytest.mark.django_db

NOT_CONFIRMED = (
    "This passkey did not confirm that it is you: it is not one of this account&#x27;s passkeys "
    "(it may have been removed), or the request took too long. Try again, or use another way "
    "below."
)
GONE = (
    "This sign-in can no longer be finished: too many attempts, or it took too long. Sign in again."
)
GARBLED = json.dumps({"id": "x", "rawId": "x", "response": {}})
SWITCH = {
    "SMS": "Use a code sent by SMS instead",
    "TOTP": "Use your authenticator app instead",
    "PASSKEY": "Use a passkey instead",
}


@pytest.fixture(autouse=True)
def relying_party(settings: Any) -> None:
    settings.WEBAUTHN_RP_ID = "localhost"
    settings.WEBAUTHN_ORIGINS = [ORIGIN]


@pytest.fixture
def authenticator(browser: Client) -> SoftAuthenticator:
    """The person's passkey, added on the Security page: two-factor sign-in is on with it."""
    device = SoftAuthenticator()
    added(browser, device)
    return device


def password_step(client: Client, person: User, path: str = "/login") -> str:
    """The second step's address after the password."""
    response = client.post(path, {"login": person.email, "password": DEFAULT_PASSWORD})
    assert response["Location"].startswith("/login/two-factor?requestId="), response
    return str(response["Location"])


def request_id(step: str) -> str:
    found = re.search(r"requestId=([0-9a-f-]{36})", step)
    assert found is not None
    return found.group(1)


def answered(client: Client, step: str, device: SoftAuthenticator, **answer: Any) -> Any:
    """What static/passkeys.js does: the options fetched, the device asked, the answer posted."""
    started = client.post(f"/login/two-factor/options?requestId={request_id(step)}").json()
    credential = device.get(started["options"])
    body = {"action": "passkey", "requestId": started["requestId"], **answer}
    body.setdefault("credential", json.dumps(credential))
    return client.post(step, body)


def sms_sent(person: User) -> int:
    return OutboxMessage.objects.filter(to=person.phone).count()


def test_the_second_step_asks_for_the_passkey_and_its_answer_signs_in(person, authenticator):
    client = Client()
    step = password_step(client, person)

    page = text(client.get(step))
    signed_in = answered(client, step, authenticator)

    assert "<h1>Confirm with your passkey</h1>" in page
    assert f'data-options="/login/two-factor/options?requestId={request_id(step)}"' in page
    assert "/static/passkeys.js" in page
    assert 'data-cancelled="The passkey was cancelled, or the browser stopped waiting.' in page
    assert ">Use your passkey</button>" in page
    assert '<label for="id_code">Recovery code</label>' in page
    assert 'id="other-factors"' not in page  # a passkey is all Grace holds
    assert signed_in.status_code == 302
    assert signed_in["Location"] == "/bus"
    assert signed_in.cookies[DEVICE_TOKEN_COOKIE]["httponly"]
    assert Passkey.objects.get(user=person).last_used_at is not None
    assert client.get("/bus").status_code == 200


def test_a_passkey_answer_goes_where_the_sign_in_was_asked_for(person, authenticator):
    client = Client()
    step = password_step(client, person, "/login?next=/settings/security")

    signed_in = answered(client, step, authenticator)

    assert "next=%2Fsettings%2Fsecurity" in step
    assert signed_in["Location"] == "/settings/security"


@pytest.mark.parametrize(
    "answer",
    [
        {"credential": GARBLED},
        {"credential": "not json"},
        {"requestId": str(uuid.uuid4())},
    ],
)
def test_a_passkey_answer_that_does_not_verify_says_so_and_loses_nothing(
    person, authenticator, answer
):
    client = Client()
    step = password_step(client, person)

    refused = answered(client, step, authenticator, **answer)
    signed_in = answered(client, step, authenticator)

    assert refused.status_code == 200
    assert '<div class="form-errors" role="alert" id="passkey-errors">' in text(refused)
    assert NOT_CONFIRMED in text(refused)
    assert ">Use your passkey</button>" in text(refused)
    assert 'name="code"' in text(refused)
    assert signed_in["Location"] == "/bus"


def test_another_persons_passkey_does_not_confirm_the_sign_in(person, authenticator):
    other = User.objects.create_user("ada", "ada@example.com", DEFAULT_PASSWORD)
    User.objects.filter(pk=other.pk).update(email_confirmed=True)
    theirs = Client()
    theirs.post("/login", {"login": other.email, "password": DEFAULT_PASSWORD})
    their_device = SoftAuthenticator()
    added(theirs, their_device)
    client = Client()
    step = password_step(client, person)

    refused = answered(client, step, their_device)

    assert NOT_CONFIRMED in text(refused)
    assert "_auth_user_id" not in client.session


def test_once_the_attempts_are_spent_the_page_says_to_sign_in_again(person, authenticator):
    client = Client()
    step = password_step(client, person)
    Challenge.objects.filter(pk=request_id(step)).update(attempts_left=1)

    refused = answered(client, step, authenticator, credential=GARBLED)
    options = client.post(f"/login/two-factor/options?requestId={request_id(step)}")

    assert GONE in text(refused)
    assert (options.status_code, options.json()) == (429, {"error": GONE})


def test_the_options_of_an_unknown_sign_in_say_to_start_again(client):
    unknown = client.post(f"/login/two-factor/options?requestId={uuid.uuid4()}")
    read = client.get(f"/login/two-factor/options?requestId={uuid.uuid4()}")

    assert (unknown.status_code, unknown.json()) == (404, {"error": GONE})
    assert read.status_code == 405


def test_a_recovery_code_signs_in_where_the_passkey_is_asked_for(browser, person, authenticator):
    codes = re.findall(
        r"<li><code>([a-z2-9]{5}-[a-z2-9]{5})</code></li>",
        text(browser.post("/settings/two-factor/recovery-codes")),
    )
    client = Client()
    step = password_step(client, person)

    wrong = client.post(step, {"code": "00000-00000"})
    signed_in = client.post(step, {"code": codes[0]})

    assert "The code is wrong. Attempts left: 4." in text(wrong)
    assert ">Use your passkey</button>" in text(wrong)
    assert signed_in["Location"] == "/bus"


def test_the_sign_in_switches_from_the_passkey_to_sms_and_back_without_a_second_sms(
    browser, person, authenticator
):
    turned_on = browser.post("/settings/two-factor/enable")
    browser.post(turned_on["Location"], {"code": last_code(person.phone)})
    client = Client()
    step = password_step(client, person)
    before = sms_sent(person)

    asked = text(client.get(step))
    to_sms = client.post(step, {"action": "switch", "method": "SMS"})
    sms_page = text(client.get(step))
    client.post(step, {"action": "switch", "method": "PASSKEY"})
    back = text(client.get(step))
    client.post(step, {"action": "switch", "method": "SMS"})  # within the cooldown
    again = text(client.get(step))
    signed_in = client.post(step, {"code": last_code(person.phone)})

    assert ">Use your passkey</button>" in asked
    assert f">{SWITCH['SMS']}</button>" in asked
    assert to_sms["Location"] == step
    assert "<h1>Enter the SMS code</h1>" in sms_page
    assert "we sent a 6-digit code to your phone." in sms_page
    assert f">{SWITCH['PASSKEY']}</button>" in sms_page
    assert ">Use your passkey</button>" in back
    assert "<h1>Enter the SMS code</h1>" in again
    assert 'data-retry-after="0"' not in again  # the cooldown of the code sent is counted
    assert sms_sent(person) == before + 1
    assert signed_in["Location"] == "/bus"


def test_the_sign_in_switches_from_the_app_to_the_passkey(browser, person, authenticator):
    started = browser.post("/settings/two-factor/app/start")
    secret = re.search(r'id="totp-secret">([A-Z2-7]+)<', text(browser.get(started["Location"])))
    assert secret is not None
    browser.post(started["Location"], {"code": pyotp.TOTP(secret.group(1)).now()})
    browser.post("/settings/two-factor/first", {"method": "TOTP"})
    client = Client()
    step = password_step(client, person)

    asked = text(client.get(step))
    client.post(step, {"action": "switch", "method": "PASSKEY"})
    signed_in = answered(client, step, authenticator)

    assert "<h1>Enter the code from your app</h1>" in asked
    assert f">{SWITCH['PASSKEY']}</button>" in asked
    assert signed_in["Location"] == "/bus"


@pytest.mark.parametrize(
    ("method", "said"), [("TOTP", "This is not one of your second factors."), ("EMAIL", "")]
)
def test_switching_to_a_factor_the_person_does_not_hold_changes_nothing(
    person, authenticator, method, said
):
    client = Client()
    step = password_step(client, person)

    page = client.post(step, {"action": "switch", "method": method}, follow=True)

    assert "<h1>Confirm with your passkey</h1>" in text(page)
    assert Challenge.objects.get(pk=request_id(step)).method == "PASSKEY"
    assert said in text(page)


def test_the_passkey_step_speaks_russian(person, authenticator):
    client = Client(headers={"accept-language": "ru"})
    step = password_step(client, person)

    page = text(client.get(step))

    assert "Подтвердите вход ключом доступа" in page
    assert "Использовать ключ доступа" in page
