from __future__ import annotations

from functools import cache
from typing import Any

import factory
from django.contrib.auth.hashers import Argon2PasswordHasher, make_password

from accounts.identifiers import email_canonical
from accounts.models import User

DEFAULT_PASSWORD = "correct-horse-battery-staple"


def _default_password_hash() -> str:
    # Argon2id is slow on purpose; one hash serves every factory-made user hashed at the same
    # cost (the lowest in most tests, the configured one in some: tests/conftest.py).
    hasher = Argon2PasswordHasher
    return _password_hash_at(hasher.time_cost, hasher.memory_cost, hasher.parallelism)


@cache
def _password_hash_at(time_cost: int, memory_cost: int, parallelism: int) -> str:
    return make_password(DEFAULT_PASSWORD)


class UserFactory(factory.django.DjangoModelFactory[User]):
    class Meta:
        model = User
        skip_postgeneration_save = True

    kind = User.Kind.USER
    username = factory.Sequence(lambda n: f"user{n}")
    email = factory.LazyAttribute(lambda user: f"{user.username}@example.com")
    email_canonical = factory.LazyAttribute(lambda user: email_canonical(user.email))
    first_name = "Ada"
    last_name = "Lovelace"
    email_confirmed = True
    password = factory.LazyFunction(_default_password_hash)


class AdapterFactory(UserFactory):
    kind = User.Kind.ADAPTER
    username = factory.Sequence(lambda n: f"adapter-{n}")
    email: Any = ""
    first_name = ""
    last_name = ""
    owner: Any = factory.SubFactory(UserFactory)
