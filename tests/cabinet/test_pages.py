"""The cabinet's pages with Django's test client: every page and each outcome a person meets."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pyotp
import pytest
import time_machine
from django.conf import settings
from django.template import Context, Template
from django.test import Client
from django.utils import timezone, translation

from accounts.models import Challenge, Session, User
from accounts.services.accounts import account_require_password_change
from exchange.models import Message
from tests.accounts.api import T0
from tests.conftest import ApiClient, last_code
from tests.factories import DEFAULT_PASSWORD

pytestmark = pytest.mark.django_db

PASSWORD = "a-long-and-unusual-passphrase"


def sign_in(client: Client, login: str, password: str = DEFAULT_PASSWORD) -> Any:
    return client.post("/login", {"login": login, "password": password})


def text(response: Any) -> str:
    return re.sub(r"\s+", " ", response.content.decode())


@pytest.mark.parametrize("path", ["/login", "/register", "/reset-password"])
def test_the_public_pages_render_with_labelled_fields(client, path):
    page = client.get(path)

    assert page.status_code == 200
    for field_id in re.findall(r'<input[^>]+id="([^"]+)"', page.content.decode()):
        assert f'for="{field_id}"' in page.content.decode()


@pytest.mark.parametrize("path", ["/bus", "/welcome", "/settings/security", "/settings/password"])
def test_the_cabinet_pages_need_a_sign_in(client, path):
    response = client.get(path)

    assert response.status_code == 302
    assert response["Location"].startswith("/login")


@pytest.mark.parametrize("path", ["/bus", "/welcome", "/settings/security", "/settings/password"])
def test_the_cabinet_pages_render_for_a_signed_in_user(browser, path):
    assert browser.get(path).status_code == 200


def test_the_home_page_is_the_bus(client):
    assert client.get("/")["Location"] == "/bus"


def test_a_wrong_password_says_nothing_about_the_account(client, person):
    known = sign_in(client, person.email, "wrong")
    unknown = sign_in(client, "nobody@example.com", "wrong")

    assert known.status_code == unknown.status_code == 200
    assert "The e-mail, login or password is wrong." in text(known)
    assert "The e-mail, login or password is wrong." in text(unknown)


def form_error(page: Any) -> str:
    errors = re.search(r'<div class="form-errors"[^>]*>(.*?)</div>', text(page))
    assert errors is not None, text(page)
    return re.sub(r"<[^>]+>", "", errors.group(1)).strip()


@pytest.mark.parametrize("login", ["grace@example.com", "grace", "nobody@example.com", "nobody"])
def test_the_last_wrong_passwords_are_counted_down_and_the_fifth_says_until_when_it_locked(
    client, person, settings, login
):
    # An unknown identifier is counted as an account is: the same sentences, in the same order.
    settings.ACCOUNTS_LOCKOUT_SECONDS = 900
    with time_machine.travel(T0, tick=False):
        said = [form_error(sign_in(client, login, "wrong")) for _ in range(5)]
        locked = form_error(sign_in(client, login, DEFAULT_PASSWORD))

    wrong = "The e-mail, login or password is wrong."
    assert said == [
        wrong,
        wrong,
        f"{wrong} 2 more wrong passwords lock the account for 15 min.",
        f"{wrong} 1 more wrong password locks the account for 15 min.",
        f"{wrong} That was too many wrong passwords: the account is now locked until "
        "2026-11-21 09:15 UTC. You can reset your password to unlock it.",
    ]
    assert locked == (
        "Too many wrong passwords: the account is locked until 2026-11-21 09:15 UTC. "
        "You can reset your password to unlock it."
    )


def test_a_success_starts_the_count_down_again(client, person):
    for _ in range(4):
        sign_in(client, person.email, "wrong")
    assert sign_in(client, person.email)["Location"] == "/bus"
    client.post("/logout")

    assert form_error(sign_in(client, person.email, "wrong")) == (
        "The e-mail, login or password is wrong."
    )


def test_a_disabled_account_is_told_so(client, person):
    User.objects.filter(pk=person.pk).update(is_active=False)

    assert "This account is disabled." in text(sign_in(client, person.email))


def test_an_unconfirmed_e_mail_goes_to_the_code_form(client, person):
    User.objects.filter(pk=person.pk).update(email_confirmed=False)

    response = sign_in(client, person.email)

    assert response.status_code == 302
    assert response["Location"].startswith("/register/confirm?requestId=")
    form = client.get(response["Location"])
    assert "We sent a 6-digit code to grace@example.com" in text(form)


def test_expired_credentials_go_to_the_password_reset(client, person):
    User.objects.filter(pk=person.pk).update(credentials_expire_at=timezone.now())

    response = sign_in(client, person.email)

    assert response["Location"] == "/reset-password"


def test_two_factor_sign_in_asks_for_the_sms_code(client, person):
    User.objects.filter(pk=person.pk).update(two_factor_enabled=True, code_factor="SMS")

    step_one = sign_in(client, person.email)
    assert step_one["Location"].startswith("/login/two-factor?requestId=")
    wrong = client.post(step_one["Location"], {"code": "000000"})
    assert "The code is wrong. Attempts left: 4." in text(wrong)
    step_two = client.post(step_one["Location"], {"code": last_code(person.phone)})

    assert step_two["Location"] == "/bus"
    assert client.get("/bus").status_code == 200


def test_adapters_cannot_sign_in_to_the_cabinet(client, adapter):
    response = sign_in(client, "erp")

    assert response["Location"] == "/login"
    assert not Session.objects.filter(user=adapter, revoked_at__isnull=True).exists()


def test_registration_confirm_and_welcome(client):
    registered = client.post(
        "/register",
        {"email": "new@example.com", "new_password": PASSWORD, "confirm_password": PASSWORD},
    )
    assert registered["Location"].startswith("/register/confirm?requestId=")

    confirmed = client.post(registered["Location"], {"code": last_code("new@example.com")})
    assert confirmed["Location"] == "/welcome"

    welcomed = client.post(
        "/welcome", {"first_name": "Ada", "last_name": "Lovelace", "phone": "+49 151 23456789"}
    )
    assert welcomed["Location"] == "/bus"
    assert User.objects.get(email="new@example.com").phone == "+4915123456789"


def test_registration_errors_stay_on_their_fields(client, person):
    taken = client.post(
        "/register",
        {"email": "GRACE@example.com", "new_password": PASSWORD, "confirm_password": PASSWORD},
    )
    weak = client.post(
        "/register",
        {"email": "weak@example.com", "new_password": "password", "confirm_password": "password"},
    )
    differ = client.post(
        "/register",
        {"email": "d@example.com", "new_password": PASSWORD, "confirm_password": PASSWORD + "x"},
    )

    assert "An account with this e-mail already exists." in text(taken)
    assert "This password is too common." in text(weak)
    assert "The passwords differ." in text(differ)


def test_the_code_page_offers_a_resend_with_its_countdown(client, settings):
    registered = client.post(
        "/register",
        {"email": "new@example.com", "new_password": PASSWORD, "confirm_password": PASSWORD},
    )
    page = client.get(registered["Location"])
    assert re.search(r'data-retry-after="(60|59)"', text(page))

    early = client.post(registered["Location"], {"action": "resend"}, follow=True)
    assert "You can ask again in" in text(early)
    Challenge.objects.update(sent_at=timezone.now() - timedelta(minutes=2))
    resent = client.post(registered["Location"], {"action": "resend"}, follow=True)
    assert "A new code is on its way." in text(resent)


def test_password_reset_by_code(client, person):
    requested = client.post("/reset-password", {"email": person.email})
    assert requested["Location"].startswith("/reset-password/confirm?requestId=")

    done = client.post(
        requested["Location"],
        {"code": last_code(person.email), "new_password": PASSWORD, "confirm_password": PASSWORD},
    )

    assert done["Location"] == "/login"
    assert sign_in(client, person.email, PASSWORD)["Location"] == "/bus"


def test_password_reset_for_an_unknown_e_mail_looks_the_same(client):
    requested = client.post("/reset-password", {"email": "nobody@example.com"})

    assert requested["Location"].startswith("/reset-password/confirm?requestId=")
    assert "If nobody@example.com has an account" in text(client.get(requested["Location"]))


def test_signing_out_ends_the_platform_session(browser, person):
    browser.post("/logout")

    assert Session.objects.get(user=person).revoked_reason == "logout"
    assert browser.get("/bus")["Location"].startswith("/login")


def test_a_session_revoked_elsewhere_signs_the_browser_out(browser, person):
    Session.objects.filter(user=person).update(revoked_at=timezone.now())

    assert browser.get("/bus")["Location"].startswith("/login")


def test_the_sign_in_rotates_the_session_key(client, person):
    anonymous = client.session
    anonymous["probe"] = True
    anonymous.save()
    before = anonymous.session_key

    sign_in(client, person.email)

    assert client.session.session_key != before
    assert client.session.get("platform_session")


def test_an_administrator_required_change_keeps_the_user_on_the_password_page(browser, person):
    account_require_password_change(user=person, actor=None)

    assert browser.get("/bus")["Location"] == "/settings/password"
    page = browser.get("/settings/password")
    assert "Your administrator requires a new password." in text(page)
    changed = browser.post(
        "/settings/password",
        {
            "current_password": DEFAULT_PASSWORD,
            "new_password": PASSWORD,
            "confirm_password": PASSWORD,
        },
    )
    assert changed["Location"] == "/settings/security"
    assert browser.get("/bus").status_code == 200


def test_changing_the_password_signs_out_other_sessions(browser, person):
    other = ApiClient(device_id="phone")
    other.call(
        "post", "/api/auth/login/email", {"email": person.email, "password": DEFAULT_PASSWORD}
    )

    browser.post(
        "/settings/password",
        {
            "current_password": DEFAULT_PASSWORD,
            "new_password": PASSWORD,
            "confirm_password": PASSWORD,
        },
    )

    assert Session.objects.filter(user=person, revoked_at__isnull=True).count() == 1
    assert browser.get("/bus").status_code == 200


def test_turning_two_factor_on_and_off(browser, person):
    started = browser.post("/settings/two-factor/enable")
    assert started["Location"].startswith("/settings/two-factor?requestId=")

    on = browser.post(started["Location"], {"code": last_code(person.phone)})
    assert on.status_code == 200  # the recovery codes, shown once
    assert len(re.findall(r"<li><code>[a-z2-9]{5}-[a-z2-9]{5}</code></li>", text(on))) == 10
    assert on["Cache-Control"] == "no-store"
    person.refresh_from_db()
    assert person.two_factor_enabled
    assert "On: signing in asks for a code sent to +4915123456789." in text(
        browser.get("/settings/security")
    )

    browser.post("/settings/two-factor/disable")
    person.refresh_from_db()
    assert not person.two_factor_enabled


def test_two_factor_needs_a_phone_first(browser, person):
    User.objects.filter(pk=person.pk).update(phone="", first_name="")

    response = browser.post("/settings/two-factor/enable", follow=True)

    assert "Add your mobile phone first" in text(response)


def test_the_security_page_lists_sessions_and_signs_out_others(browser, person):
    ApiClient(device_id="phone").call(
        "post", "/api/auth/login/email", {"email": person.email, "password": DEFAULT_PASSWORD}
    )
    page = text(browser.get("/settings/security"))
    assert "phone" in page
    assert "this browser" in page
    assert "Signed in" in page  # the recent security events

    browser.post("/settings/sessions/revoke", {"scope": "others"})

    assert Session.objects.filter(user=person, revoked_at__isnull=True).count() == 1


def test_the_bus_creates_an_adapter_and_shows_its_password_once(browser, person):
    browser.post("/bus/adapters", {"login": "billing"})

    first = text(browser.get("/bus"))
    again = text(browser.get("/bus"))

    password = re.search(r'id="credential-password">([^<]+)<', first)
    assert password is not None
    assert password.group(1) not in again
    assert ApiClient().sign_in("billing", password.group(1)).status_code == 200


def test_the_bus_sends_a_test_message_and_shows_the_queue(browser, person):
    browser.post("/bus/adapters", {"login": "billing"})
    adapter = User.objects.get(username="billing")

    browser.post(f"/bus/adapters/{adapter.pk}/test-message")

    assert Message.objects.filter(recipient=adapter, type="cabinet.test").count() == 1
    page = browser.get("/bus").content.decode()
    assert re.search(r'data-figure="available">\s*1\s*<', page)


def test_the_bus_disables_rotates_and_refuses_foreign_adapters(browser, person, adapter):
    browser.post("/bus/adapters", {"login": "billing"})
    mine = User.objects.get(username="billing")

    browser.post(f"/bus/adapters/{mine.pk}/disable")
    mine.refresh_from_db()
    assert mine.is_active is False

    foreign = browser.post(f"/bus/adapters/{adapter.pk}/disable", follow=True)
    adapter.refresh_from_db()
    assert adapter.is_active is True
    assert "You have no adapter with this id." in text(foreign)


def test_the_bus_has_a_clear_empty_state(browser):
    assert "No adapters yet." in text(browser.get("/bus"))


def test_forms_post_only_with_csrf(person):
    client = Client(enforce_csrf_checks=True)

    response = client.post("/login", {"login": person.email, "password": DEFAULT_PASSWORD})

    assert response.status_code == 403


@pytest.mark.parametrize("path", ["/login", "/register", "/bus", "/settings/security"])
def test_pages_forbid_inline_script_and_framing_and_run_none(client, browser, path):
    page = (client if path in ("/login", "/register") else browser).get(path)

    policy = page["Content-Security-Policy"]
    assert "script-src 'self'" in policy
    assert "frame-ancestors 'none'" in policy
    assert page["X-Frame-Options"] == "DENY"
    assert page["Referrer-Policy"] == "same-origin"
    # Every script is a file of our own: nothing inline for the policy to refuse.
    scripts = re.findall(r"<script([^>]*)>(.*?)</script>", page.content.decode(), re.S)
    assert scripts
    assert all('src="/static/' in attributes and not body.strip() for attributes, body in scripts)
    assert ' style="' not in page.content.decode()


def test_code_pages_point_to_the_development_outbox_only_in_debug(client, settings):
    registered = client.post(
        "/register",
        {"email": "new@example.com", "new_password": PASSWORD, "confirm_password": PASSWORD},
    )
    settings.DEBUG = False
    assert "/dev/outbox" not in text(client.get(registered["Location"]))
    settings.DEBUG = True
    assert 'href="/dev/outbox"' in text(client.get(registered["Location"]))


def test_a_refused_adapter_login_is_told_on_its_field_and_stays_typed(browser, person):
    page = browser.post("/bus/adapters", {"login": "bad login!"})

    assert page.status_code == 200
    html = text(page)
    error = re.search(r'<p class="error" id="id_login_error">([^<]*)</p>', html)
    assert error is not None
    assert error.group(1).startswith("Enter a valid username.")
    assert re.search(r'<input[^>]*name="login"[^>]*value="bad login!"', html)
    assert "Some fields are invalid" not in html
    assert not User.objects.filter(kind=User.Kind.ADAPTER, owner=person).exists()


def test_a_taken_adapter_login_is_told_on_its_field(browser, person, adapter):
    page = browser.post("/bus/adapters", {"login": adapter.username})

    assert re.search(
        r'id="id_login_error">Another account already uses this login. </p>', text(page)
    )


@pytest.mark.parametrize(
    ("action", "question", "button"),
    [
        ("rotate", "Give billing a new password?", "Set a new password"),
        ("disable", "Disable billing?", "Disable"),
    ],
)
def test_a_new_password_and_disabling_ask_first_and_act_only_on_the_confirmation(
    browser, person, action, question, button
):
    browser.post("/bus/adapters", {"login": "billing"})
    browser.get("/bus")  # the credentials, shown once
    adapter = User.objects.get(username="billing")
    before = (adapter.password, adapter.is_active)

    bus = text(browser.get("/bus"))
    asked = browser.get(f"/bus/adapters/{adapter.pk}/{action}")

    assert f'<form method="get" action="/bus/adapters/{adapter.pk}/{action}">' in bus
    assert f'<form method="post" action="/bus/adapters/{adapter.pk}/{action}">' not in bus
    assert asked.status_code == 200
    assert f"<h1>{question}</h1>" in text(asked)
    assert f'<button type="submit" class="danger">{button}</button>' in text(asked)
    adapter.refresh_from_db()
    assert (adapter.password, adapter.is_active) == before

    done = browser.post(f"/bus/adapters/{adapter.pk}/{action}")

    assert done["Location"] == "/bus"
    adapter.refresh_from_db()
    assert (adapter.password, adapter.is_active) != before


def test_the_confirmation_pages_refuse_foreign_adapters_and_other_actions(browser, adapter):
    foreign = browser.get(f"/bus/adapters/{adapter.pk}/rotate", follow=True)
    browser.post("/bus/adapters", {"login": "billing"})
    mine = User.objects.get(username="billing")

    assert "You have no adapter with this id." in text(foreign)
    assert browser.get(f"/bus/adapters/{mine.pk}/revoke").status_code == 405


@pytest.mark.parametrize("path", ["/bus", "/settings/security", "/settings/password"])
def test_the_header_says_who_is_signed_in(browser, person, path):
    page = text(browser.get(path))

    assert re.search(r'id="signed-in-as">Signed in as <strong>grace@example.com</strong>', page)


def test_the_header_names_nobody_before_the_sign_in(client):
    assert 'id="signed-in-as"' not in text(client.get("/login"))


TEMPLATES = Path(settings.BASE_DIR) / "templates"


def test_every_page_shows_moments_through_the_one_utc_filter():
    pages = [
        *TEMPLATES.glob("cabinet/*.html"),
        *TEMPLATES.glob("dev/*.html"),
        TEMPLATES / "base.html",
    ]

    for page in pages:
        source = page.read_text()
        assert "|date" not in source, page
        assert "|time" not in source, page
    assert "|utc" in (TEMPLATES / "cabinet/bus.html").read_text()
    assert "|utc" in (TEMPLATES / "cabinet/security.html").read_text()


def test_the_utc_filter_says_utc_whatever_zone_is_active():
    moment = datetime(2026, 11, 24, 23, 11, 30, tzinfo=ZoneInfo("Europe/Moscow"))
    template = Template("{% load cabinet %}{{ moment|utc }}|{{ none|utc }}")

    with timezone.override("America/New_York"), translation.override("ru"):
        shown = template.render(Context({"moment": moment, "none": None}))

    assert shown == "2026-11-24 20:11 UTC|"


def test_the_bus_and_the_security_page_show_utc_times(browser, person):
    browser.post("/bus/adapters", {"login": "billing"})
    adapter = User.objects.get(username="billing")
    User.objects.filter(pk=adapter.pk).update(last_login=datetime(2026, 11, 24, 20, 11, tzinfo=UTC))
    Session.objects.filter(user=person).update(
        created_at=datetime(2026, 11, 24, 20, 10, tzinfo=UTC)
    )

    assert '<dd class="date">2026-11-24 20:11 UTC</dd>' in text(browser.get("/bus"))
    assert "signed in 2026-11-24 20:10 UTC" in text(browser.get("/settings/security"))


def test_the_sessions_list_names_browser_system_and_device_id(browser, person):
    phone = Client(
        HTTP_USER_AGENT=(
            "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 "
            "(KHTML, like Gecko) Chrome/131.0.0.0 Mobile Safari/537.36"
        )
    )
    sign_in(phone, person.email)
    ApiClient(device_id="erp-7").call(
        "post", "/api/auth/login/email", {"email": person.email, "password": DEFAULT_PASSWORD}
    )

    page = text(browser.get("/settings/security"))

    assert "Chrome Mobile 131 · Android 14 · Pixel 8</strong>" in page
    assert "Device ID: <code>erp-7</code>" in page


def test_a_wrong_code_says_how_many_attempts_are_left_once(client, person):
    User.objects.filter(pk=person.pk).update(two_factor_enabled=True, code_factor="SMS")
    step_one = sign_in(client, person.email)

    wrong = text(client.post(step_one["Location"], {"code": "000000"}))

    assert len(re.findall(r"attempts? left", wrong, re.I)) == 1
    assert "The code is wrong. Attempts left: 4." in wrong


@pytest.mark.parametrize(
    "fields",
    [
        {"email": "not-an-address", "confirm_password": "password"},
        {"email": "new@example.com", "confirm_password": "something-else"},
        {"email": "grace@example.com", "confirm_password": "password"},
    ],
)
def test_the_first_submit_of_the_registration_judges_the_password_too(client, person, fields):
    page = client.post("/register", {"new_password": "password", **fields})

    assert page.status_code == 200
    error = re.search(r'id="id_new_password_error">([^<]*)</p>', text(page))
    assert error is not None
    assert "This password is too common." in error.group(1)


def test_every_page_names_its_icon_and_favicon_ico_leads_to_it(client):
    icon = client.get("/favicon.ico")

    assert icon.status_code == 301
    assert icon["Location"] == "/static/favicon.ico"
    assert '<link rel="icon" href="/static/favicon.ico"' in text(client.get("/login"))
    assert (Path(settings.BASE_DIR) / "static/favicon.ico").read_bytes()[:4] == b"\0\0\1\0"


def totp_code(page: Any) -> str:
    secret = re.search(r'<code class="secret" id="totp-secret">([A-Z2-7]+)</code>', text(page))
    assert secret is not None
    return pyotp.TOTP(secret.group(1)).now()


@time_machine.travel(T0, tick=False)
def test_an_authenticator_app_is_added_with_its_qr_code_and_asked_for_at_sign_in(browser, person):
    started = browser.post("/settings/two-factor/app/start")
    assert started["Location"].startswith("/settings/two-factor/app?requestId=")
    page = browser.get(started["Location"])
    assert page.status_code == 200
    assert page["Cache-Control"] == "no-store"
    assert re.search(r"<figure class=\"qr\"><svg [^>]*><path ", text(page))
    assert "<script" not in text(page).split("<main", 1)[1]

    wrong = browser.post(started["Location"], {"code": "12345"})
    assert "The code is wrong. Attempts left: 4." in text(wrong)
    on = browser.post(started["Location"], {"code": totp_code(page)})

    assert len(re.findall(r"<li><code>[a-z2-9]{5}-[a-z2-9]{5}</code></li>", text(on))) == 10
    security = text(browser.get("/settings/security"))
    assert "On: signing in asks for the code your authenticator app shows." in security
    assert "10 recovery codes left." in security
    browser.post("/logout")
    to_code = sign_in(browser, person.email)
    assert to_code["Location"].startswith("/login/two-factor?requestId=")
    code_page = text(browser.get(to_code["Location"]))
    assert "Enter the code from your app" in code_page
    assert "Send a new code" not in code_page


@time_machine.travel(T0, tick=False)
def test_a_recovery_code_signs_in_at_the_code_page_and_the_count_goes_down(browser, person):
    started = browser.post("/settings/two-factor/app/start")
    page = browser.get(started["Location"])
    on = browser.post(started["Location"], {"code": totp_code(page)})
    codes = re.findall(r"<li><code>([a-z2-9]{5}-[a-z2-9]{5})</code></li>", text(on))
    browser.post("/logout")

    to_code = sign_in(browser, person.email)
    signed = browser.post(to_code["Location"], {"code": codes[0]})

    assert signed["Location"] == "/bus"
    assert "9 recovery codes left." in text(browser.get("/settings/security"))
    new = browser.post("/settings/two-factor/recovery-codes")
    assert len(re.findall(r"<li><code>", text(new))) == 10
    assert "10 recovery codes left." in text(browser.get("/settings/security"))


def test_another_persons_app_page_sends_back_to_security(browser, person):
    other = ApiClient(device_id="x")
    owner = User.objects.create_user("mallory", "mallory@example.com", DEFAULT_PASSWORD)
    User.objects.filter(pk=owner.pk).update(email_confirmed=True)
    other.tokens = other.call(
        "post",
        "/api/auth/login/email",
        {"email": "mallory@example.com", "password": DEFAULT_PASSWORD},
    ).json()
    theirs = other.call("post", "/api/users/two-factor-authentication/totp").json()

    page = browser.get(f"/settings/two-factor/app?requestId={theirs['requestId']}")

    assert page["Location"] == "/settings/security"
    assert theirs["secret"] not in page.content.decode()
