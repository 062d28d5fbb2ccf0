from __future__ import annotations

from typing import Any

import pytest

from accounts.models import User
from tests.factories import UserFactory


@pytest.fixture
def ada(db: Any) -> User:
    """A cabinet user without a phone number."""
    return UserFactory.create(username="ada", email="ada@example.com", phone="")
