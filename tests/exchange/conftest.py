"""Fixtures of the exchange's tests (the owner and its adapter are tests/conftest.py's)."""

from __future__ import annotations

import pytest

from accounts.models import User
from tests.conftest import ApiClient
from tests.factories import AdapterFactory


@pytest.fixture
def sender(owner: User) -> ApiClient:
    """A second adapter of the same owner ("crm"), signed in."""
    AdapterFactory.create(username="crm", owner=owner)
    client = ApiClient(device_id="crm-1")
    assert client.sign_in("crm").status_code == 200
    return client
