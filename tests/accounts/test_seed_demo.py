"""seed_demo, the demo accounts of `make run`: created once, their passwords kept in a file that
only the checkout's user reads; a second `make run` prints them again and leaves the accounts, their
sessions and their owners' mail alone; `--rotate` (`make demo-rotate`) gives new ones on demand.
"""

from __future__ import annotations

import io
import json
import re
import stat
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from accounts.management.commands.seed_demo import DEMO_ADAPTER_LOGIN
from accounts.models import OutboxMessage, User
from tests.accounts.api import outcome
from tests.conftest import ApiClient

pytestmark = pytest.mark.django_db

ROLES = {"cabinet user": "demo", "administrator": "admin", "adapter": DEMO_ADAPTER_LOGIN}


@pytest.fixture
def kept(tmp_path: Path, settings: Any) -> Path:
    """Where the test's seed_demo keeps the passwords (the checkout's .data/ is left alone)."""
    settings.DEBUG = True
    return tmp_path / "data" / "demo-accounts.json"


def seed(kept: Path, *flags: str) -> str:
    printed = io.StringIO()
    call_command("seed_demo", "--credentials", str(kept), *flags, stdout=printed)
    return printed.getvalue()


def passwords_in(output: str) -> dict[str, str]:
    return dict(
        # A generated password: 32 URL-safe characters (what is not shown is said in words).
        re.findall(
            r"^\s+(cabinet user|administrator|adapter)\s.*\spassword ([\w-]{32})(?!\S)",
            output,
            re.M,
        )
    )


def opens(role: str, password: str) -> bool:
    return User.objects.get(username=ROLES[role]).check_password(password)


def signed_in_adapter(password: str) -> ApiClient:
    client = ApiClient(device_id="demo-consumer-1")
    assert client.sign_in(DEMO_ADAPTER_LOGIN, password).status_code == 200
    return client


def test_seed_demo_creates_the_demo_accounts_and_prints_working_passwords(kept):
    printed = passwords_in(seed(kept))

    assert set(printed) == set(ROLES)
    assert all(opens(role, password) for role, password in printed.items())
    demo = User.objects.get(username="demo")
    assert (demo.email_confirmed, demo.first_name != "", demo.phone) == (
        True,
        True,
        "+4915123456789",
    )
    assert User.objects.get(username="admin").is_superuser
    assert User.objects.get(username=DEMO_ADAPTER_LOGIN).owner == demo


def test_seed_demo_keeps_the_passwords_in_a_file_only_its_user_may_read(kept):
    printed = passwords_in(seed(kept))

    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    assert json.loads(kept.read_text()) == {ROLES[role]: printed[role] for role in ROLES}


def test_seed_demo_a_second_time_keeps_passwords_and_sessions_and_mails_nothing(kept):
    first = passwords_in(seed(kept))
    consumer = signed_in_adapter(first["adapter"])
    mailed = OutboxMessage.objects.count()

    again = seed(kept)

    assert passwords_in(again) == first
    assert all(opens(role, password) for role, password in first.items())
    assert consumer.refresh().status_code == 200
    assert OutboxMessage.objects.count() == mailed
    assert "make demo-rotate" in again


def test_seed_demo_rotate_gives_new_passwords_and_ends_the_sessions(kept):
    first = passwords_in(seed(kept))
    consumer = signed_in_adapter(first["adapter"])

    rotated = passwords_in(seed(kept, "--rotate"))

    assert set(rotated) == set(ROLES)
    assert all(rotated[role] != first[role] for role in ROLES)
    assert all(opens(role, password) for role, password in rotated.items())
    assert outcome(consumer.refresh()) == (401, "TOKEN_REVOKED")
    assert json.loads(kept.read_text()) == {ROLES[role]: rotated[role] for role in ROLES}
    assert passwords_in(seed(kept)) == rotated


def test_seed_demo_says_how_to_rotate_when_the_kept_passwords_are_gone(kept):
    first = passwords_in(seed(kept))
    consumer = signed_in_adapter(first["adapter"])
    kept.unlink()

    again = seed(kept)

    assert passwords_in(again) == {}
    assert again.count("password not kept") == 3
    assert f"{kept} lacks it" in again
    assert "make demo-rotate" in again
    assert all(opens(role, password) for role, password in first.items())
    assert consumer.refresh().status_code == 200
    assert not kept.exists()


def test_seed_demo_says_so_when_a_kept_password_no_longer_opens_its_account(kept):
    first = passwords_in(seed(kept))
    admin = User.objects.get(username="admin")
    admin.set_password("changed-in-the-admin-1")
    admin.save()

    again = seed(kept)

    assert passwords_in(again) == {
        "cabinet user": first["cabinet user"],
        "adapter": first["adapter"],
    }
    assert "administrator  admin   password changed since it was kept" in again
    assert admin.check_password("changed-in-the-admin-1")


def test_seed_demo_creates_an_account_that_was_deleted_and_keeps_the_others(kept):
    first = passwords_in(seed(kept))
    User.objects.filter(username="admin").delete()

    again = passwords_in(seed(kept))

    assert again["cabinet user"] == first["cabinet user"]
    assert again["administrator"] != first["administrator"]
    assert opens("administrator", again["administrator"])
    assert json.loads(kept.read_text())["admin"] == again["administrator"]


def test_seed_demo_refuses_to_run_without_debug(kept, settings):
    settings.DEBUG = False

    with pytest.raises(CommandError, match="only with DEBUG=true"):
        seed(kept)

    assert not User.objects.filter(username="demo").exists()
    assert not kept.exists()
