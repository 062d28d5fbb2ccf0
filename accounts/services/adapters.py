"""Adapters: client systems owned by a cabinet user, signing in with a generated password."""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from django.contrib.auth.validators import ASCIIUsernameValidator
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.http import HttpRequest

from accounts import liveness
from accounts.errors import AdapterNotFound, LoginTaken
from accounts.models import User
from accounts.services.accounts import account_set_active
from accounts.services.audit import Kind, audit
from accounts.services.notices import Notice, notice_send
from accounts.services.passwords import password_generate
from accounts.services.sessions import sessions_revoke_for_user
from platform_site.errors import ValidationFailed


@dataclass(frozen=True)
class AdapterCredentials:
    """What the owner sees once: the password is not stored anywhere in clear."""

    adapter_id: int
    login: str
    password: str


def _login_generate() -> str:
    return f"adapter-{secrets.token_hex(4)}"


def adapter_create(*, owner: User, login: str | None = None) -> AdapterCredentials:
    """Create an adapter for ``owner``; the generated password is in the result and nowhere else."""
    if owner.kind != User.Kind.USER:
        raise ValidationFailed({"owner": ["Only a cabinet user can own adapters."]})
    chosen = login or _login_generate()
    try:
        ASCIIUsernameValidator()(chosen)
    except ValidationError as error:
        raise ValidationFailed({"login": list(error.messages)}) from None
    password = password_generate()
    adapter = User(kind=User.Kind.ADAPTER, owner=owner, username=chosen)
    adapter.set_password(password)
    try:
        with transaction.atomic():
            adapter.save()
    except IntegrityError:
        raise LoginTaken() from None
    return AdapterCredentials(adapter_id=adapter.pk, login=adapter.username, password=password)


def adapter_for_owner(*, owner: User, adapter_id: int) -> User:
    """``owner``'s adapter ``adapter_id``; anybody else's is AdapterNotFound, like a missing one."""
    adapter = User.objects.filter(pk=adapter_id, kind=User.Kind.ADAPTER, owner=owner).first()
    if adapter is None:
        raise AdapterNotFound()
    return adapter


@transaction.atomic
def adapter_password_rotate(
    *, adapter: User, request: HttpRequest | None = None, actor: User | None = None
) -> str:
    """Give ``adapter`` a new generated password and return it; the old one and every session
    signed in with it stop working. For an adapter this is the password reset: expired
    credentials are renewed. Its owner is told by e-mail (from ``request``, the owner's own, or
    else by the administration)."""
    password = password_generate()
    with liveness.changing([adapter.pk]):
        adapter.set_password(password)
        adapter.credentials_expire_at = None
        adapter.save(update_fields=["password", "password_changed_at", "credentials_expire_at"])
        sessions_revoke_for_user(user=adapter, reason="password_rotated")
        audit(Kind.ADAPTER_PASSWORD_ROTATED, user=adapter, actor=actor, request=request)
        if adapter.owner is not None:
            notice_send(
                Notice.ADAPTER_PASSWORD_ROTATED,
                user=adapter.owner,
                request=request,
                adapter=adapter.username,
            )
    return password


DISPLAY_NAME_MAX_LENGTH = 100


def adapter_display_name_set(*, adapter: User, display_name: str) -> User:
    """Name ``adapter`` for people (its owner's choice, shown beside its login); empty: no name.
    Surrounding whitespace is not part of it."""
    name = display_name.strip()
    if len(name) > DISPLAY_NAME_MAX_LENGTH:
        raise ValidationFailed({"displayName": [f"At most {DISPLAY_NAME_MAX_LENGTH} characters."]})
    if name != adapter.display_name:
        with liveness.changing([adapter.pk]):
            adapter.display_name = name
            adapter.save(update_fields=["display_name"])
    return adapter


@transaction.atomic
def adapter_update(
    *, adapter: User, active: bool | None, display_name: str | None, actor: User | None
) -> User:
    """Change what is given of ``adapter``: its display name, and disabled or enabled
    (``account_set_active``); None leaves that as it is."""
    if display_name is not None:
        adapter_display_name_set(adapter=adapter, display_name=display_name)
    if active is not None:
        account_set_active(user=adapter, active=active, actor=actor)
    return adapter


def adapter_delete(*, adapter: User) -> None:
    """Delete ``adapter`` with its sessions; what other apps keep of it goes with it (their
    foreign keys cascade). The exchange empties its queue before (exchange/api/owners.py)."""
    with liveness.changing([adapter.pk]):
        adapter.delete()
