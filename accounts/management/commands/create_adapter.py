"""Create an adapter for a cabinet user from a script: prints its login and one-time password."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from accounts.selectors import user_for_identifier
from accounts.services.adapters import adapter_create
from platform_site.errors import ApplicationError


class Command(BaseCommand):
    help = "Create an adapter owned by the cabinet user with this e-mail; prints its password once."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--owner", required=True, help="The owner's e-mail address.")
        parser.add_argument("--login", help="The adapter's login (generated when omitted).")
        parser.add_argument(
            "--json", action="store_true", help='Print {"adapterId", "login", "password"}.'
        )

    def handle(self, *args: Any, **options: Any) -> None:
        owner = user_for_identifier(kind="email", identifier=options["owner"])
        if owner is None:
            raise CommandError(f"No cabinet user has the e-mail address {options['owner']}.")
        try:
            credentials = adapter_create(owner=owner, login=options["login"])
        except ApplicationError as error:
            raise CommandError(f"{error.code}: {error.detail}") from None
        if options["json"]:
            self.stdout.write(
                json.dumps(
                    {
                        "adapterId": credentials.adapter_id,
                        "login": credentials.login,
                        "password": credentials.password,
                    }
                )
            )
        else:
            self.stdout.write(
                f"Adapter {credentials.login} (id {credentials.adapter_id}) for {owner.email}; "
                f"password, shown once: {credentials.password}"
            )
