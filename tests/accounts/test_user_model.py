"""accounts.User: one model for cabinet users and adapters, with the field names
docs/sessions.md ("Principals") keeps stable."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
import time_machine
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from accounts.models import User, validate_e164
from tests.factories import AdapterFactory, UserFactory

pytestmark = pytest.mark.django_db


def test_the_documented_fields_exist_with_their_names():
    names = {field.name for field in User._meta.get_fields()}

    assert {
        "kind",
        "owner",
        "email",
        "username",
        "first_name",
        "last_name",
        "phone",
        "email_confirmed",
        "two_factor_enabled",
        "reset_password_required",
        "account_expires_at",
        "credentials_expire_at",
        "password_changed_at",
        "is_active",
        "is_staff",
    } <= names


def test_email_is_unique_whatever_its_case():
    UserFactory.create(email="Ada@Example.com")

    with pytest.raises(IntegrityError), transaction.atomic():
        UserFactory.create(email="ada@example.COM")


def test_email_uniqueness_is_explained_by_model_validation():
    UserFactory.create(email="ada@example.com")
    duplicate = User(username="other", email="ADA@example.com")
    duplicate.set_unusable_password()

    with pytest.raises(ValidationError) as raised:
        duplicate.full_clean()

    assert "A user with this e-mail address already exists." in str(raised.value)


def test_adapters_without_email_do_not_collide():
    owner = UserFactory.create()
    AdapterFactory.create(owner=owner)
    AdapterFactory.create(owner=owner)

    assert User.objects.filter(kind=User.Kind.ADAPTER, email="").count() == 2


def test_username_is_unique_and_case_sensitive():
    UserFactory.create(username="Alice", email="alice.upper@example.com")
    UserFactory.create(username="alice", email="alice.lower@example.com")

    with pytest.raises(IntegrityError), transaction.atomic():
        UserFactory.create(username="Alice", email="someone.else@example.com")


def test_an_adapter_must_have_an_owner():
    with pytest.raises(IntegrityError), transaction.atomic():
        AdapterFactory.create(owner=None)


def test_a_cabinet_user_has_no_owner():
    with pytest.raises(IntegrityError), transaction.atomic():
        UserFactory.create(owner=UserFactory.create())


def test_deleting_the_owner_deletes_their_adapters():
    owner = UserFactory.create()
    adapter = AdapterFactory.create(owner=owner)

    owner.delete()

    assert not User.objects.filter(pk=adapter.pk).exists()


def test_passwords_are_hashed_with_argon2id():
    user = UserFactory.create()

    user.set_password("a long and unusual passphrase")

    assert user.password.startswith("argon2$argon2id$")
    assert user.check_password("a long and unusual passphrase")


@time_machine.travel(datetime(2026, 11, 21, 9, 30, tzinfo=UTC), tick=False)
def test_setting_a_password_records_when_it_changed():
    user = UserFactory.create(password_changed_at=None)

    user.set_password("a long and unusual passphrase")

    assert user.password_changed_at == datetime(2026, 11, 21, 9, 30, tzinfo=UTC)


@pytest.mark.parametrize(
    ("password", "message"),
    [
        ("short1!", "This password is too short. It must contain at least 8 characters."),
        ("password123", "This password is too common."),
        ("8451209367", "This password is entirely numeric."),
    ],
)
def test_djangos_password_validators_are_on(password, message):
    with pytest.raises(ValidationError) as raised:
        validate_password(password)

    assert message in raised.value.messages


def test_a_64_character_password_is_accepted():
    validate_password("x7Gq2yLk9vN4pR8sT1wZ5bC3dF6hJ0mQ-aE_uI2oY4tW8rV1nM6kL3jH9gB7fD5s")


@pytest.mark.parametrize("phone", ["+4915123456789", "+79161234567", "+14155552671"])
def test_e164_phone_numbers_are_valid(phone):
    validate_e164(phone)


@pytest.mark.parametrize(
    "phone", ["015123456789", "+49 151 23456789", "+4915", "phone", "+999123456789"]
)
def test_phone_numbers_not_in_e164_are_refused(phone):
    with pytest.raises(ValidationError) as raised:
        validate_e164(phone)

    assert raised.value.code == "invalid_phone"
