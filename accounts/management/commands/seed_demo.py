"""Demo accounts for `make run`: a cabinet user, an administrator and an adapter."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from accounts import liveness
from accounts.identifiers import email_canonical
from accounts.models import User
from accounts.services.adapters import adapter_create, adapter_password_rotate
from accounts.services.passwords import password_generate

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


class Command(BaseCommand):
    help = "Create or refresh the demo accounts and print their new passwords (DEBUG only)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--base-url", default="http://127.0.0.1:8000")

    @transaction.atomic
    def handle(self, *args: Any, **options: Any) -> None:
        if not settings.DEBUG:
            raise CommandError(
                "seed_demo creates accounts and prints their passwords; "
                "it runs only with DEBUG=true."
            )
        user, user_password = self._person(DEMO_USER)
        admin, admin_password = self._person({**DEMO_ADMIN, "is_staff": True, "is_superuser": True})
        adapter = User.objects.filter(username=DEMO_ADAPTER_LOGIN, owner=user).first()
        if adapter is None:
            adapter_password = adapter_create(owner=user, login=DEMO_ADAPTER_LOGIN).password
        else:
            adapter_password = adapter_password_rotate(adapter=adapter)

        base = options["base_url"].rstrip("/")
        self.stdout.write(
            "\n".join(
                [
                    "",
                    "Demo accounts (new passwords on every run):",
                    f"  cabinet user   {user.email} (username {user.username})"
                    f"   password {user_password}   {base}/login",
                    f"  administrator  {admin.username}   password {admin_password}"
                    f"   {base}/admin/",
                    f"  adapter        login {DEMO_ADAPTER_LOGIN}   password {adapter_password}",
                    f"  API reference  {base}/api/docs/",
                    f"  e-mails, SMS   {base}/dev/outbox (codes of registration, 2FA, reset)",
                    "",
                ]
            )
        )

    def _person(self, fields: dict[str, Any]) -> tuple[User, str]:
        canonical = email_canonical(fields["email"])
        password = password_generate()
        # A demo user of an earlier run may be signed in: they get a new password.
        earlier = User.objects.filter(username=fields["username"]).values_list("pk", flat=True)
        with liveness.changing(list(earlier)):
            user, _ = User.objects.update_or_create(
                username=fields["username"],
                defaults={**fields, "email_canonical": canonical, "kind": User.Kind.USER},
            )
            user.set_password(password)
            user.save()
        return user, password
