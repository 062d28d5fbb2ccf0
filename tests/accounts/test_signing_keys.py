"""Signing key rotation: tokens name their key (kid); previous keys verify, never sign; a key taken
out of the settings stops verifying at once; tokens from before key ids keep their sessions."""

from __future__ import annotations

from typing import Any

import jwt
import pytest

from accounts.signing_keys import KeyedAccessToken, KeyedRefreshToken, key_id
from tests.accounts.api import claims_of
from tests.conftest import ApiClient

pytestmark = pytest.mark.django_db

KEY_A = "a" * 8 + "-first-signing-key-of-the-rotation-tests-0123456789"
KEY_B = "b" * 8 + "-second-signing-key-of-the-rotation-tests-012345678"
KEY_C = "c" * 8 + "-third-signing-key-of-the-rotation-tests-0123456789"


def kid_of(token: str) -> str | None:
    return jwt.get_unverified_header(token).get("kid")


def as_issued_before_key_ids(token: str, key: str) -> str:
    """The token as the releases before key ids signed it: same claims, header without kid."""
    return jwt.encode(claims_of(token), key, algorithm="HS256")


def whoami(consumer: ApiClient, token: str) -> tuple[int, str | None]:
    response = consumer.call("get", "/api/exchange/whoami", HTTP_AUTHORIZATION=f"Bearer {token}")
    return response.status_code, response.json().get("code")


def refresh(consumer: ApiClient, token: str) -> Any:
    return consumer.call("post", "/api/auth/refresh", {"refreshToken": token})


def keys(settings: Any, current: str, *previous: str) -> None:
    settings.JWT_SIGNING_KEY = current
    settings.JWT_PREVIOUS_SIGNING_KEYS = previous


@pytest.fixture
def under_key_a(settings: Any) -> None:
    keys(settings, KEY_A)


def test_the_key_id_is_the_first_16_hex_digits_of_the_keys_sha256():
    # printf %s development-only-jwt-signing-key-do-not-use-in-production-0123 | sha256sum
    key = "development-only-jwt-signing-key-do-not-use-in-production-0123"

    assert key_id(key) == "a77f5ab66e842139"


def test_both_tokens_of_a_pair_name_the_current_key(under_key_a, consumer):
    for token in (consumer.tokens["accessToken"], consumer.tokens["refreshToken"]):
        assert jwt.get_unverified_header(token) == {
            "alg": "HS256",
            "kid": key_id(KEY_A),
            "typ": "JWT",
        }
        jwt.decode(token, KEY_A, algorithms=["HS256"], audience="exchange-platform")


def test_simplejwt_signs_and_verifies_our_tokens_through_the_keyed_backend(settings):
    # The one seam into simplejwt (Token.token_backend): if a release stops reading it on encode
    # or decode, this fails before any token goes out unkeyed or is checked with the wrong key.
    keys(settings, KEY_B, KEY_A)
    token = KeyedAccessToken()
    token["sid"] = "s"
    signed_with_b = str(token)
    keys(settings, KEY_A)
    signed_with_a = str(KeyedRefreshToken())
    keys(settings, KEY_B, KEY_A)

    assert kid_of(signed_with_b) == key_id(KEY_B)
    assert KeyedAccessToken(signed_with_b)["sid"] == "s"  # type: ignore[arg-type]
    assert KeyedRefreshToken(signed_with_a)["typ"] == "refresh"  # type: ignore[arg-type]


def test_after_a_rotation_old_tokens_work_and_a_refresh_gives_a_pair_signed_with_the_new_key(
    under_key_a, consumer, settings
):
    old = consumer.tokens
    keys(settings, KEY_B, KEY_A)

    assert whoami(consumer, old["accessToken"]) == (200, None)
    refreshed = refresh(consumer, old["refreshToken"])
    assert refreshed.status_code == 200, refreshed.content
    new = refreshed.json()
    assert (kid_of(new["accessToken"]), kid_of(new["refreshToken"])) == (key_id(KEY_B),) * 2
    assert whoami(consumer, new["accessToken"]) == (200, None)

    keys(settings, KEY_B)  # A removed

    assert whoami(consumer, new["accessToken"]) == (200, None)
    assert refresh(consumer, new["refreshToken"]).status_code == 200


def test_a_key_removed_from_the_settings_stops_verifying_even_tokens_already_verified(
    under_key_a, consumer, settings
):
    access, refresh_token = consumer.tokens["accessToken"], consumer.tokens["refreshToken"]
    keys(settings, KEY_B, KEY_A)
    assert whoami(consumer, access) == (200, None)  # verified once, its claims remembered

    keys(settings, KEY_B)

    assert whoami(consumer, access) == (401, "TOKEN_MALFORMED")
    assert refresh(consumer, refresh_token).json()["code"] == "TOKEN_MALFORMED"


def test_a_refused_token_of_a_removed_key_is_not_taken_for_a_reused_refresh_token(
    under_key_a, consumer, settings
):
    stale_refresh = consumer.tokens["refreshToken"]
    keys(settings, KEY_B, KEY_A)
    assert consumer.refresh().status_code == 200
    keys(settings, KEY_B)

    # Refused on its signature: the session is not revoked as it would be for a replay.
    assert refresh(consumer, stale_refresh).json()["code"] == "TOKEN_MALFORMED"
    assert whoami(consumer, consumer.tokens["accessToken"]) == (200, None)


def test_a_key_listed_as_previous_before_it_signs_accepts_the_new_keys_tokens(
    under_key_a, consumer, settings
):
    # Several replicas: every one first lists B, then they switch to signing with B one by one.
    keys(settings, KEY_A, KEY_B)
    assert consumer.refresh().status_code == 200
    assert kid_of(consumer.tokens["accessToken"]) == key_id(KEY_A)

    keys(settings, KEY_B, KEY_A)
    assert consumer.refresh().status_code == 200
    signed_with_b = consumer.tokens

    keys(settings, KEY_A, KEY_B)  # a replica not switched yet

    assert whoami(consumer, signed_with_b["accessToken"]) == (200, None)
    assert refresh(consumer, signed_with_b["refreshToken"]).status_code == 200


@pytest.mark.parametrize(
    ("signed_with", "configured"),
    [
        pytest.param(KEY_A, (KEY_A,), id="the-upgrade-itself"),
        pytest.param(KEY_A, (KEY_B, KEY_A), id="a-rotation-right-after-the-upgrade"),
        pytest.param(KEY_A, (KEY_C, KEY_B, KEY_A), id="two-rotations-within-the-refresh-ttl"),
    ],
)
def test_a_session_signed_in_before_key_ids_keeps_working_and_refreshes_into_keyed_tokens(
    under_key_a, consumer, settings, signed_with, configured
):
    access = as_issued_before_key_ids(consumer.tokens["accessToken"], signed_with)
    refresh_token = as_issued_before_key_ids(consumer.tokens["refreshToken"], signed_with)
    assert kid_of(access) is None
    keys(settings, *configured)

    assert whoami(consumer, access) == (200, None)
    refreshed = refresh(consumer, refresh_token)
    assert refreshed.status_code == 200, refreshed.content
    assert kid_of(refreshed.json()["accessToken"]) == key_id(configured[0])


@pytest.mark.parametrize(
    ("signed_with", "configured"),
    [
        pytest.param(KEY_C, (KEY_A,), id="a-key-never-configured"),
        pytest.param(KEY_A, (KEY_B,), id="a-key-removed"),
    ],
)
def test_a_token_without_kid_is_refused_unless_a_configured_key_signed_it(
    under_key_a, consumer, settings, signed_with, configured
):
    access = as_issued_before_key_ids(consumer.tokens["accessToken"], signed_with)
    refresh_token = as_issued_before_key_ids(consumer.tokens["refreshToken"], signed_with)
    keys(settings, *configured)

    assert whoami(consumer, access) == (401, "TOKEN_MALFORMED")
    assert refresh(consumer, refresh_token).json()["code"] == "TOKEN_MALFORMED"
