"""Run inside `manage.py shell` of a stack test's database (StackDatabase.shell): adapters with
sessions made straight in the database, printed as JSON for the test to read."""

from __future__ import annotations

import json

from django.db import transaction

from accounts.devices import Device
from accounts.models import User
from accounts.services.sessions import session_start


def adapters_with_sessions(prefix: str, count: int) -> None:
    """``count`` adapters of one new owner, each signed in once from its own device id (a
    sign-in each would spend most of a test hashing passwords): [[id, access, refresh, device]]."""
    owner = User.objects.create_user(username=f"{prefix}-owner", email=f"{prefix}@example.com")
    signed = []
    with transaction.atomic():
        for n in range(count):
            adapter = User.objects.create(
                kind=User.Kind.ADAPTER, owner=owner, username=f"{prefix}-{n}", password="!"
            )
            signed.append(_signed_in(adapter, f"{prefix}-{n}"))
    print(json.dumps(signed))  # noqa: T201


def session_more(adapter_id: int, device_id: str) -> None:
    """Another session of adapter ``adapter_id``, from ``device_id``."""
    print(json.dumps([_signed_in(User.objects.get(pk=adapter_id), device_id)]))  # noqa: T201


def _signed_in(adapter: User, device_id: str) -> list[object]:
    device = Device(key=f"d:{device_id}", device_id=device_id, user_agent="stack", ip="127.0.0.1")
    _, pair = session_start(user=adapter, device=device)
    return [adapter.pk, pair.access_token, pair.refresh_token, device_id]
