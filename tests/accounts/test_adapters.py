"""Adapters are created for a cabinet user with a generated password shown once."""

from __future__ import annotations

import re

import pytest
from django.core.management import CommandError, call_command

from accounts.errors import LoginTaken
from accounts.models import User
from accounts.services.accounts import account_require_password_change
from accounts.services.adapters import adapter_create, adapter_password_rotate
from platform_site.errors import ValidationFailed
from tests.factories import AdapterFactory, UserFactory

pytestmark = pytest.mark.django_db


def test_an_adapter_is_created_for_its_owner_with_a_usable_password():
    owner = UserFactory.create()

    credentials = adapter_create(owner=owner, login="erp-bridge")

    adapter = User.objects.get(pk=credentials.adapter_id)
    assert (adapter.kind, adapter.owner, adapter.username) == (
        User.Kind.ADAPTER,
        owner,
        "erp-bridge",
    )
    assert credentials.login == "erp-bridge"
    assert adapter.check_password(credentials.password)
    assert credentials.password not in adapter.password


def test_a_generated_password_carries_at_least_128_bits():
    credentials = adapter_create(owner=UserFactory.create())

    # URL-safe base64: 6 bits a character.
    assert re.fullmatch(r"[A-Za-z0-9_-]+", credentials.password)
    assert len(credentials.password) * 6 >= 128


def test_a_login_is_generated_when_none_is_given():
    first = adapter_create(owner=UserFactory.create())
    second = adapter_create(owner=UserFactory.create())

    assert re.fullmatch(r"adapter-[0-9a-f]{8}", first.login)
    assert first.login != second.login


def test_a_taken_login_is_a_conflict():
    AdapterFactory.create(username="erp-bridge")

    with pytest.raises(LoginTaken):
        adapter_create(owner=UserFactory.create(), login="erp-bridge")


def test_a_login_with_spaces_is_invalid():
    with pytest.raises(ValidationFailed) as raised:
        adapter_create(owner=UserFactory.create(), login="erp bridge")

    assert "login" in raised.value.extra["errors"]


def test_an_adapter_cannot_own_adapters():
    with pytest.raises(ValidationFailed):
        adapter_create(owner=AdapterFactory.create())


def test_rotation_replaces_the_password():
    credentials = adapter_create(owner=UserFactory.create())
    adapter = User.objects.get(pk=credentials.adapter_id)

    new_password = adapter_password_rotate(adapter=adapter)

    adapter.refresh_from_db()
    assert adapter.check_password(new_password)
    assert not adapter.check_password(credentials.password)


def passwords_in(output: str) -> dict[str, str]:
    return dict(
        re.findall(r"^\s+(cabinet user|administrator|adapter)\s.*password (\S+)", output, re.M)
    )


def test_seed_demo_creates_the_demo_accounts_and_prints_working_passwords(settings, capsys):
    settings.DEBUG = True

    call_command("seed_demo")

    printed = passwords_in(capsys.readouterr().out)
    assert set(printed) == {"cabinet user", "administrator", "adapter"}
    demo = User.objects.get(username="demo")
    assert demo.check_password(printed["cabinet user"])
    assert (demo.email_confirmed, demo.first_name != "", demo.phone) == (
        True,
        True,
        "+4915123456789",
    )
    assert User.objects.get(username="admin", is_superuser=True).check_password(
        printed["administrator"]
    )
    adapter = User.objects.get(username="demo-adapter")
    assert (adapter.owner, adapter.check_password(printed["adapter"])) == (demo, True)


def test_seed_demo_runs_again_with_fresh_passwords(settings, capsys):
    settings.DEBUG = True
    call_command("seed_demo")
    first = passwords_in(capsys.readouterr().out)

    call_command("seed_demo")

    second = passwords_in(capsys.readouterr().out)
    assert User.objects.filter(username__in=["demo", "admin", "demo-adapter"]).count() == 3
    assert first["adapter"] != second["adapter"]
    assert User.objects.get(username="demo-adapter").check_password(second["adapter"])


def test_seed_demo_refuses_to_run_without_debug(settings):
    settings.DEBUG = False

    with pytest.raises(CommandError, match="only with DEBUG=true"):
        call_command("seed_demo")

    assert not User.objects.filter(username="demo").exists()


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
