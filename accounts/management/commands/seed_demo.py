"""Demo accounts for `make run`: a cabinet user, an administrator and an adapter.

The first run creates them and keeps their passwords in a file that only the checkout's user may
read (``.data/demo-accounts.json``, git-ignored). Later runs leave the accounts alone and print the
kept passwords again: a consumer signed in against the development server survives its restart,
and nobody is told of a new password on every start. ``--rotate`` (``make demo-rotate``) gives them
new passwords, ends their sessions and keeps the new ones.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth.hashers import check_password
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from accounts import liveness
from accounts.identifiers import email_canonical
from accounts.models import User
from accounts.services.adapters import adapter_create, adapter_password_rotate
from accounts.services.passwords import password_generate, password_set_by_administrator

DEMO_USER = {
    "username": "demo",
    "email": "demo@example.com",
    "first_name": "Demo",
    "last_name": "User",
    "phone": "+4915123456789",
    "email_confirmed": True,
}
DEMO_ADMIN = {"username": "admin", "email": "admin@example.com", "email_confirmed": True}
DEMO_ADAPTER_LOGIN = "demo-adapter"
ROTATE = "`make demo-rotate` (manage.py seed_demo --rotate)"


class Command(BaseCommand):
    help = (
        "Create the demo accounts, or print the passwords kept since they were created; "
        "--rotate gives them new ones and ends their sessions (DEBUG only)."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--base-url", default="http://127.0.0.1:8000")
        parser.add_argument(
            "--rotate",
            action="store_true",
            help="new passwords for the demo accounts that exist; their sessions end",
        )
        parser.add_argument(
            "--credentials",
            type=Path,
            help="the file that keeps the passwords (default: .data/demo-accounts.json)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if not settings.DEBUG:
            raise CommandError(
                "seed_demo creates accounts and prints their passwords; "
                "it runs only with DEBUG=true."
            )
        path: Path = options["credentials"] or Path(settings.BASE_DIR) / ".data/demo-accounts.json"
        kept = self._kept(path)
        rotate: bool = options["rotate"]
        with transaction.atomic():
            user, user_password = _person(DEMO_USER, kept=kept, rotate=rotate)
            admin, admin_password = _person(
                {**DEMO_ADMIN, "is_staff": True, "is_superuser": True}, kept=kept, rotate=rotate
            )
            adapter_password = _adapter(owner=user, kept=kept, rotate=rotate)
        shown = {
            user.username: user_password,
            admin.username: admin_password,
            DEMO_ADAPTER_LOGIN: adapter_password,
        }
        fresh = {
            login: password
            for login, password in shown.items()
            if password is not None and kept.get(login) != password
        }
        if fresh:
            self._keep(path, {**kept, **fresh})

        def secret(login: str) -> str:
            password = shown[login]
            if password is not None:
                return f"password {password}"
            return "password changed since it was kept" if login in kept else "password not kept"

        base = options["base_url"].rstrip("/")
        lines = [
            "",
            f"Demo accounts, with new passwords (their sessions ended), kept in {path}:"
            if rotate
            else f"Demo accounts (passwords kept in {path}; {ROTATE} gives new ones):",
            f"  cabinet user   {user.email} (username {user.username})"
            f"   {secret(user.username)}   {base}/login",
            f"  administrator  {admin.username}   {secret(admin.username)}   {base}/admin/",
            f"  adapter        login {DEMO_ADAPTER_LOGIN}   {secret(DEMO_ADAPTER_LOGIN)}",
            f"  API reference  {base}/api/docs/",
            f"  e-mails, SMS   {base}/dev/outbox (codes of registration, 2FA, reset)",
        ]
        if None in shown.values():
            lines.append(
                f"A password not shown stays as it is: {path} lacks it (removed?), or it was "
                f"changed since. {ROTATE} gives all three new ones and ends their sessions."
            )
        self.stdout.write("\n".join([*lines, ""]))

    def _kept(self, path: Path) -> dict[str, str]:
        try:
            kept = json.loads(path.read_text())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as error:
            self.stderr.write(f"The demo passwords in {path} cannot be read ({error}).")
            return {}
        if not isinstance(kept, dict):
            return {}
        return {k: v for k, v in kept.items() if isinstance(k, str) and isinstance(v, str)}

    def _keep(self, path: Path, passwords: dict[str, str]) -> None:
        partial = path.with_name(f".{path.name}.partial")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            # Readable by this user alone from its first byte: the passwords open the admin.
            descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(descriptor, "w") as file:
                os.fchmod(descriptor, 0o600)  # a partial file that an earlier run left behind
                json.dump(passwords, file, indent=2)
                file.write("\n")
            # Replaced whole, so that a run which fails here leaves the passwords of the last one.
            os.replace(partial, path)
        except OSError as error:
            self.stderr.write(
                f"The new demo passwords could not be kept in {path} ({error}): "
                "they are printed below only."
            )


def _kept_password(user: User, kept: dict[str, str]) -> str | None:
    """The kept password of ``user`` while it still opens the account."""
    password = kept.get(user.username)
    # Not user.check_password(): on an outdated hash it saves the account anew (a write).
    if password is None or not check_password(password, user.password):
        return None
    return password


def _person(
    fields: dict[str, Any], *, kept: dict[str, str], rotate: bool
) -> tuple[User, str | None]:
    user = User.objects.filter(username=fields["username"]).first()
    if user is not None and not rotate:
        return user, _kept_password(user, kept)
    password = password_generate()
    profile = {
        **fields,
        "email_canonical": email_canonical(fields["email"]),
        "kind": User.Kind.USER,
    }
    if user is None:
        user = User(**profile)
        user.set_password(password)
        user.save()
        return user, password
    # Rotation restores the demo profile too, and ends the sessions as any new password does.
    with liveness.changing([user.pk]):
        for name, value in profile.items():
            setattr(user, name, value)
        user.set_password(password)
        user.save()
        password_set_by_administrator(user=user, actor=None)
    return user, password


def _adapter(*, owner: User, kept: dict[str, str], rotate: bool) -> str | None:
    adapter = User.objects.filter(username=DEMO_ADAPTER_LOGIN, owner=owner).first()
    if adapter is None:
        return adapter_create(owner=owner, login=DEMO_ADAPTER_LOGIN).password
    if rotate:
        return adapter_password_rotate(adapter=adapter)
    return _kept_password(adapter, kept)
