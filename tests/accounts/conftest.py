from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import time_machine

from accounts.models import User
from tests.accounts.api import T0
from tests.factories import UserFactory


@pytest.fixture
def ada(db: Any) -> User:
    """A cabinet user without a phone number."""
    return UserFactory.create(username="ada", email="ada@example.com", phone="")


@pytest.fixture
def clock() -> Iterator[Any]:
    """The clock stopped at T0, for a test to move with ``shift``."""
    with time_machine.travel(T0, tick=False) as traveller:
        yield traveller
