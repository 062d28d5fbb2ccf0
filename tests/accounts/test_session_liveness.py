"""Every writer of a User or Session row moves the user's revision (accounts.liveness), inside the
transaction of its write, so that no worker keeps answering from a remembered row.

Nothing calls accounts.liveness for a service: each one writes inside ``liveness.changing``. This
file is what keeps that from being forgotten. Each writer of the platform is run on real commits
while every statement is watched: its user's revision in Redis must change, and every write to
``accounts_user`` or ``accounts_session`` other than the quiet fields (liveness.QUIET) must come
after the revision was replaced in the same transaction. A new writer belongs in WRITERS.
"""

from __future__ import annotations

import io
import re
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pyotp
import pytest
from django.core import mail
from django.core.management import call_command
from django.db import connection, transaction
from django.test import override_settings
from redis import Redis

from accounts import liveness, sms
from accounts.devices import Device
from accounts.management.commands.seed_demo import DEMO_USER
from accounts.models import Session, User
from accounts.services.accounts import (
    account_credentials_expire,
    account_edit,
    account_expire,
    account_require_password_change,
    account_sessions_revoke,
    account_set_active,
)
from accounts.services.adapters import (
    adapter_delete,
    adapter_display_name_set,
    adapter_password_rotate,
)
from accounts.services.deletion import account_delete_by_administrator
from accounts.services.passwords import (
    password_change,
    password_reset_confirm,
    password_reset_request,
)
from accounts.services.profile import profile_language_set, profile_update
from accounts.services.reauthentication import Proof, Reauthentication
from accounts.services.registration import email_confirm, register
from accounts.services.sessions import (
    session_delete,
    session_logout,
    session_revoke,
    sessions_revoke_for_user,
)
from accounts.services.two_factor import (
    totp_enable_confirm,
    totp_enable_start,
    two_factor_disable,
    two_factor_enable_confirm,
    two_factor_enable_start,
    two_factor_reset,
)
from tests.conftest import ApiClient
from tests.factories import DEFAULT_PASSWORD

pytestmark = pytest.mark.django_db(transaction=True)

NEW_PASSWORD = "another-Strong-passw0rd"
DEVICE = Device(key="d:liveness-1", device_id="liveness-1", user_agent="pytest", ip="127.0.0.1")
# The owner's password sent with a request that needs a fresh proof (the factories' password).
PROVED = Reauthentication(session=None, proof=Proof(password=DEFAULT_PASSWORD), device=DEVICE)
_WRITE = re.compile(
    r'^\s*(?:UPDATE "(?P<updated>accounts_user|accounts_session)" SET (?P<set>.*?) WHERE'
    r'|DELETE FROM "(?P<deleted>accounts_user|accounts_session)")',
    re.DOTALL,
)
_COLUMN = re.compile(r'"(\w+)" = ')


@dataclass
class Trail:
    """What happened while a writer ran: each statement's writes, each revision replacement,
    each transaction begun."""

    events: list[tuple[str, Any]] = field(default_factory=list)

    def unannounced_writes(self) -> list[str]:
        """Writes that no replacement of the revision preceded in their transaction."""
        announced = False
        missing = []
        for kind, value in self.events:
            if kind == "begin":
                announced = False
            elif kind == "announce":
                announced = True
            elif kind == "write" and not announced:
                missing.append(value)
        return missing

    def writes(self) -> list[str]:
        return [value for kind, value in self.events if kind == "write"]


def loud_write(sql: str) -> str | None:
    """``sql`` if it changes a User or Session row in a field the check may read."""
    match = _WRITE.match(sql)
    if match is None:
        return None
    table = match["updated"] or match["deleted"]
    if match["updated"] and set(_COLUMN.findall(match["set"])) <= liveness.QUIET[table]:
        return None
    return sql


@pytest.fixture
def trail(sessions_remembered: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Trail]:
    trail = Trail()
    replace = liveness.revisions_change

    def announced(user_ids: Any) -> None:
        user_ids = list(user_ids)
        trail.events.append(("announce", user_ids))
        replace(user_ids)

    enter = transaction.Atomic.__enter__

    def begin(self: transaction.Atomic) -> None:
        if not transaction.get_connection(self.using).in_atomic_block:
            trail.events.append(("begin", None))
        enter(self)

    def watch(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        write = loud_write(sql)
        if write is not None:
            if not connection.in_atomic_block:
                trail.events.append(("begin", None))  # autocommit: a transaction of its own
            trail.events.append(("write", write))
        return execute(sql, params, many, context)

    monkeypatch.setattr(liveness, "revisions_change", announced)
    monkeypatch.setattr(transaction.Atomic, "__enter__", begin)
    with connection.execute_wrapper(watch):
        yield trail


@dataclass
class World:
    owner: User
    adapter: User
    consumer: ApiClient
    admin: Any  # django.test.Client signed in as staff


Act = Callable[[], Any]
# A writer: given the world, does its setup and returns whose revision must move and the act.
Writer = Callable[[World], tuple[list[int], Act]]


def code_sent_to(to: str) -> str:
    """The code of the last e-mail or SMS sent to ``to`` (sent: these tests commit, and the outbox
    erases a sent code's body)."""
    texts = [message.body for message in mail.outbox if to in message.to]
    texts += [text for number, text in sms.outbox if number == to]
    match = re.search(r"\b(\d{6})\b", str(texts[-1]))
    assert match is not None, texts[-1]
    return match.group(1)


def session_of(user: User) -> Session:
    return Session.objects.filter(user=user, revoked_at__isnull=True).latest("created_at")


def disable(w: World) -> tuple[list[int], Act]:
    return [w.adapter.pk], lambda: account_set_active(user=w.adapter, active=False)


def enable(w: World) -> tuple[list[int], Act]:
    account_set_active(user=w.adapter, active=False)
    return [w.adapter.pk], lambda: account_set_active(user=w.adapter, active=True)


def disable_owner(w: World) -> tuple[list[int], Act]:
    return [w.owner.pk, w.adapter.pk], lambda: account_set_active(user=w.owner, active=False)


def enable_owner(w: World) -> tuple[list[int], Act]:
    account_set_active(user=w.owner, active=False)
    return [w.owner.pk, w.adapter.pk], lambda: account_set_active(user=w.owner, active=True)


def admin_edit_owner(w: World) -> tuple[list[int], Act]:
    def act() -> None:
        w.owner.is_active = False
        account_edit(user=w.owner, changed={"is_active"}, actor=None)

    return [w.owner.pk, w.adapter.pk], act


def require_password_change(w: World) -> tuple[list[int], Act]:
    return [w.owner.pk], lambda: account_require_password_change(user=w.owner, actor=None)


def expire_account(w: World) -> tuple[list[int], Act]:
    return [w.adapter.pk], lambda: account_expire(user=w.adapter, actor=None)


def expire_credentials(w: World) -> tuple[list[int], Act]:
    return [w.adapter.pk], lambda: account_credentials_expire(user=w.adapter, actor=None)


def admin_edit(w: World) -> tuple[list[int], Act]:
    def act() -> None:
        w.adapter.first_name = "ERP"
        w.adapter.is_active = False
        account_edit(user=w.adapter, changed={"first_name", "is_active"}, actor=None)

    return [w.adapter.pk], act


def delete_owner(w: World) -> tuple[list[int], Act]:
    return [w.owner.pk, w.adapter.pk], lambda: account_delete_by_administrator(
        user=w.owner, actor=None
    )


def revoke_all(w: World) -> tuple[list[int], Act]:
    return [w.adapter.pk], lambda: account_sessions_revoke(user=w.adapter, actor=None)


def revoke_for_user(w: World) -> tuple[list[int], Act]:
    return [w.adapter.pk], lambda: sessions_revoke_for_user(user=w.adapter, reason="x")


def revoke_one(w: World) -> tuple[list[int], Act]:
    session = session_of(w.adapter)
    return [w.adapter.pk], lambda: session_revoke(
        user_id=w.adapter.pk, session_id=session.pk, reason="x"
    )


def logout(w: World) -> tuple[list[int], Act]:
    token = w.consumer.tokens["refreshToken"]
    return [w.adapter.pk], lambda: session_logout(refresh_token=token)


def delete_session(w: World) -> tuple[list[int], Act]:
    session = session_of(w.adapter)
    return [w.adapter.pk], lambda: session_delete(session=session)


def change_password(w: World) -> tuple[list[int], Act]:
    def act() -> None:
        password_change(
            user=w.owner,
            current_password=DEFAULT_PASSWORD,
            new_password=NEW_PASSWORD,
            device=DEVICE,
            request=None,
        )

    return [w.owner.pk], act


def reset_password(w: World) -> tuple[list[int], Act]:
    started = password_reset_request(email=w.owner.email, request=None)
    code = code_sent_to(w.owner.email)
    return [w.owner.pk], lambda: password_reset_confirm(
        request_id=started.challenge.pk, code=code, new_password=NEW_PASSWORD, request=None
    )


def admin_sets_password(w: World) -> tuple[list[int], Act]:
    def act() -> None:
        response = w.admin.post(
            f"/admin/accounts/user/{w.owner.pk}/password/",
            {"password1": NEW_PASSWORD, "password2": NEW_PASSWORD, "usable_password": "true"},
        )
        assert response.status_code == 302, response.content

    return [w.owner.pk], act


def rotate_adapter_password(w: World) -> tuple[list[int], Act]:
    return [w.adapter.pk], lambda: adapter_password_rotate(adapter=w.adapter)


def name_adapter(w: World) -> tuple[list[int], Act]:
    return [w.adapter.pk], lambda: adapter_display_name_set(adapter=w.adapter, display_name="ERP")


def delete_adapter(w: World) -> tuple[list[int], Act]:
    return [w.adapter.pk], lambda: adapter_delete(adapter=w.adapter)


def update_profile(w: World) -> tuple[list[int], Act]:
    return [w.owner.pk], lambda: profile_update(user=w.owner, first_name="Ada", request=None)


def enable_two_factor(w: World) -> tuple[list[int], Act]:
    profile_update(user=w.owner, phone="+4915112345678", request=None)
    started = two_factor_enable_start(user=w.owner)
    code = code_sent_to("+4915112345678")
    return [w.owner.pk], lambda: two_factor_enable_confirm(
        user=w.owner, request_id=started.challenge.pk, code=code, request=None
    )


def disable_two_factor(w: World) -> tuple[list[int], Act]:
    _, act = enable_two_factor(w)
    act()
    return [w.owner.pk], lambda: two_factor_disable(user=w.owner, reauth=PROVED, request=None)


def enable_authenticator_app(w: World) -> tuple[list[int], Act]:
    started = totp_enable_start(user=w.owner, reauth=PROVED, request=None)
    code = pyotp.TOTP(started.secret).now()
    return [w.owner.pk], lambda: totp_enable_confirm(
        user=w.owner, request_id=started.challenge.pk, code=code, request=None
    )


def reset_two_factor(w: World) -> tuple[list[int], Act]:
    _, act = enable_authenticator_app(w)
    act()
    return [w.owner.pk], lambda: two_factor_reset(user=w.owner, actor=None)


def switch_language(w: World) -> tuple[list[int], Act]:
    return [w.owner.pk], lambda: profile_language_set(user=w.owner, language="ru")


def confirm_email(w: World) -> tuple[list[int], Act]:
    started = register(email="new@example.com", password=NEW_PASSWORD, request=None)
    user = User.objects.get(email="new@example.com")
    code = code_sent_to("new@example.com")
    return [user.pk], lambda: email_confirm(
        request_id=started.challenge.pk, code=code, device=DEVICE, request=None
    )


def rotate_demo_passwords(w: World) -> tuple[list[int], Act]:
    def seed(*flags: str) -> None:
        # seed_demo prints passwords only in development, and keeps them: here outside the checkout
        with override_settings(DEBUG=True), tempfile.TemporaryDirectory() as kept:
            call_command(
                "seed_demo", *flags, "--credentials", f"{kept}/demo.json", stdout=io.StringIO()
            )

    seed()
    demo = User.objects.get(username=DEMO_USER["username"])
    return [demo.pk], lambda: seed("--rotate")


WRITERS: list[Writer] = [
    disable,
    enable,
    disable_owner,
    enable_owner,
    admin_edit_owner,
    require_password_change,
    expire_account,
    expire_credentials,
    admin_edit,
    delete_owner,
    revoke_all,
    revoke_for_user,
    revoke_one,
    logout,
    delete_session,
    change_password,
    reset_password,
    admin_sets_password,
    rotate_adapter_password,
    name_adapter,
    delete_adapter,
    update_profile,
    enable_two_factor,
    disable_two_factor,
    enable_authenticator_app,
    reset_two_factor,
    switch_language,
    confirm_email,
    rotate_demo_passwords,
]


def revision(redis: Redis, user_id: int) -> bytes | None:
    value = redis.get(f"auth:revision:{user_id}")
    assert value is None or isinstance(value, bytes)
    return value


@pytest.mark.parametrize("writer", WRITERS, ids=[writer.__name__ for writer in WRITERS])
def test_every_writer_moves_the_revision_in_the_transaction_of_its_write(
    writer: Writer, trail: Trail, sessions_remembered: Redis, world: World
) -> None:
    user_ids, act = writer(world)
    before = {user_id: revision(sessions_remembered, user_id) for user_id in user_ids}
    trail.events.clear()

    act()

    after = {user_id: revision(sessions_remembered, user_id) for user_id in user_ids}
    assert trail.writes(), "the writer wrote nothing that a session check reads"
    assert trail.unannounced_writes() == []
    assert all(after[user_id] not in (None, before[user_id]) for user_id in user_ids), after


@pytest.mark.parametrize("writer", [disable, reset_password, rotate_adapter_password])
def test_services_that_nest_tell_redis_once(writer: Writer, trail: Trail, world: World) -> None:
    """A service made of other writers (disabling ends the sessions too) replaces each revision
    once: the enclosing transaction's replacements cover the inner writes."""
    user_ids, act = writer(world)
    trail.events.clear()

    act()

    announced = [value for kind, value in trail.events if kind == "announce"]
    assert announced == [user_ids]
    assert trail.unannounced_writes() == []


def test_the_guard_catches_a_write_outside_changing(trail: Trail, world: World) -> None:
    """The check above can fail: a write of a loud field outside ``changing`` is reported."""
    trail.events.clear()
    User.objects.filter(pk=world.adapter.pk).update(is_active=False)
    with liveness.changing([world.adapter.pk]):
        User.objects.filter(pk=world.adapter.pk).update(is_active=True)
    Session.objects.filter(user=world.adapter).update(
        last_used_at=session_of(world.adapter).created_at
    )

    assert len(trail.writes()) == 2  # the quiet "last used" is not a write that matters
    assert [write.split(" WHERE")[0] for write in trail.unannounced_writes()] == [
        'UPDATE "accounts_user" SET "is_active" = %s'
    ]


@pytest.fixture
def world(owner: User, adapter: User, consumer: ApiClient, admin_client: Any) -> World:
    return World(owner=owner, adapter=adapter, consumer=consumer, admin=admin_client)
