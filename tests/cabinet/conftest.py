"""Fixtures of the cabinet's page tests: a person signed in through the sign-in page, an adapter
of theirs, and English put back after each test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.conf import settings
from django.test import Client
from django.utils import translation

from accounts.models import User
from tests.factories import DEFAULT_PASSWORD, AdapterFactory


@pytest.fixture(autouse=True)
def _english_afterwards() -> Iterator[None]:
    # LocaleMiddleware leaves the request's language active in the thread: put English back, so
    # no later test runs in Russian.
    yield
    translation.activate(settings.LANGUAGE_CODE)


@pytest.fixture
def browser(person: User) -> Client:
    """``person`` signed in to the cabinet, as a browser would be (the session cookie)."""
    client = Client()
    signed_in = client.post("/login", {"login": person.email, "password": DEFAULT_PASSWORD})
    assert signed_in["Location"] == "/bus"
    return client


@pytest.fixture
def mine(person: User) -> User:
    """An adapter of ``person``'s."""
    return AdapterFactory.create(username="billing", owner=person)
