"""Look-alike e-mail addresses and logins (docs/users-api.md, "Addresses and logins").

Addresses are compared in one canonical form (NFKC, then case folding) and only plain ones are
stored, so nobody can register an address that stands for another's, or take its codes; logins
are stored and read in NFKC.
"""

from __future__ import annotations

import pytest
from django.core.management import call_command

from accounts.identifiers import email_canonical
from accounts.models import OutboxMessage, User
from accounts.selectors import user_for_identifier
from tests.accounts.api import KELVIN, LONG_S, PASSWORD, by_email, outcome, register, reset
from tests.conftest import ApiClient, last_code
from tests.factories import DEFAULT_PASSWORD, UserFactory

pytestmark = pytest.mark.django_db

FULL_WIDTH = "\uff4b\uff45\uff56\uff11@example.org"  # full-width kev1, read as kev1
SHARP_S = "stra\u00dfe@example.org"  # ß, which case folding turns into ss
DOTLESS = "k\u0131v@example.org"  # LATIN SMALL LETTER DOTLESS I: a letter of its own


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        (KELVIN, "plain characters"),
        (LONG_S, "plain characters"),
        # Django's EmailValidator takes ASCII local parts only, but matches [A-Z] ignoring case,
        # which lets the Kelvin sign and the long s through: those are this platform's to catch.
        (FULL_WIDTH, "Enter a valid email address."),
        (SHARP_S, "Enter a valid email address."),
    ],
)
def test_an_address_that_stands_for_another_is_refused_and_the_plain_owner_registers(
    address, reason
):
    refused = register(address)
    plain = register(email_canonical(address))

    assert outcome(refused) == (400, "VALIDATION_FAILED")
    assert reason in refused.json()["errors"]["email"][0]
    assert not User.objects.filter(email=address).exists()
    assert plain.status_code == 200
    assert OutboxMessage.objects.get().to == email_canonical(address)


def test_the_dotless_i_makes_an_address_of_its_own():
    assert register("kiv@example.org").status_code == 200
    assert register(DOTLESS).status_code == 200
    assert User.objects.filter(email__in=["kiv@example.org", DOTLESS]).count() == 2


@pytest.mark.parametrize("typed", ["kev1@example.org", KELVIN, "KEV1@example.org"])
def test_a_reset_sends_the_code_only_to_the_stored_address_however_it_is_typed(typed):
    user = UserFactory.create(username="kev", email="Kev1@example.org")

    response = reset(typed)

    assert response.status_code == 200
    [message] = OutboxMessage.objects.all()
    assert (message.user, message.to) == (user, "Kev1@example.org")


@pytest.mark.parametrize("typed", [KELVIN, FULL_WIDTH, "KEV1@EXAMPLE.ORG"])
def test_sign_in_finds_the_account_in_canonical_form_and_counts_on_its_one_counter(typed):
    UserFactory.create(username="kev", email="kev1@example.org")

    signed_in = by_email(typed)
    for _ in range(5):
        by_email(typed, "wrong")
    plain = by_email("kev1@example.org")

    assert signed_in.status_code == 200
    assert outcome(plain) == (423, "ACCOUNT_LOCKED")


def test_look_alikes_of_one_unknown_address_share_its_rate_limit(settings):
    settings.ACCOUNTS_RATE_LIMIT_ACCOUNT = "2/m"

    answers = [
        ApiClient(REMOTE_ADDR=f"10.0.0.{n}").call(
            "post", "/api/auth/reset-password", {"email": typed}
        )
        # A full-width address never reaches the reset: validation refuses it, and a refused
        # request counts against the client's IP alone.
        for n, typed in enumerate(["kev1@example.org", KELVIN, "KEV1@EXAMPLE.ORG"])
    ]

    assert [a.status_code for a in answers] == [200, 200, 429]


def test_a_login_with_characters_that_stand_for_others_is_refused_for_an_adapter(cabinet):
    response = cabinet.call("post", "/api/users/adapters", {"login": "\uff45\uff52\uff50"})

    assert outcome(response) == (400, "VALIDATION_FAILED")
    assert "Enter a valid username" in response.json()["errors"]["login"][0]


def test_a_login_is_read_in_nfkc_as_djangos_own_sign_in_reads_it(adapter):
    response = ApiClient().call(
        "post",
        "/api/auth/login/username",
        {"username": "\uff45\uff52\uff50", "password": DEFAULT_PASSWORD},  # full-width erp
    )

    assert response.status_code == 200
    assert response.json()["userDto"]["username"] == "erp"


def test_the_admin_refuses_a_look_alike_address_and_a_taken_one_without_a_500(admin_client):
    UserFactory.create(username="kev", email="kev1@example.org")
    base = {"password1": "", "password2": "", "usable_password": "false"}

    lookalike = admin_client.post(
        "/admin/accounts/user/add/", {**base, "username": "k2", "email": KELVIN}
    )
    taken = admin_client.post(
        "/admin/accounts/user/add/", {**base, "username": "k3", "email": "KEV1@example.org"}
    )
    fresh = admin_client.post(
        "/admin/accounts/user/add/", {**base, "username": "k4", "email": "New@Example.org"}
    )

    assert lookalike.status_code == 200
    assert "plain characters" in str(lookalike.context["adminform"].form.errors["email"])
    assert taken.status_code == 200
    assert "already exists" in str(taken.context["adminform"].form.errors["email"])
    assert fresh.status_code == 302
    assert User.objects.get(username="k4").email_canonical == "new@example.org"


def test_createsuperuser_stores_the_canonical_form(monkeypatch):
    monkeypatch.setenv("DJANGO_SUPERUSER_PASSWORD", PASSWORD)

    call_command(
        "createsuperuser", "--no-input", "--username", "root2", "--email", "Root@Example.org"
    )

    root = User.objects.get(username="root2")
    assert root.email_canonical == "root@example.org"
    assert user_for_identifier(kind="email", identifier="ROOT@example.org") == root


def test_an_address_without_its_canonical_form_cannot_be_stored():
    from django.db import IntegrityError, transaction

    with pytest.raises(IntegrityError), transaction.atomic():
        User.objects.create(username="raw", email="raw@example.org")


def test_a_new_address_in_the_profile_of_a_user_gets_its_canonical_form_through_clean(owner):
    owner.email = "Owner.New@Example.com"
    owner.full_clean()
    owner.save()

    assert User.objects.get(pk=owner.pk).email_canonical == "owner.new@example.com"


def test_last_code_of_a_registration_goes_to_the_typed_plain_address():
    register("Grace@Example.org")

    assert last_code("Grace@Example.org")
