"""Forged, altered and misused tokens are refused with 401, never accepted and never a 500
(docs/sessions.md, "Tokens and sessions")."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from django.conf import settings

from accounts.signing_keys import key_id
from tests.accounts.api import claims_of
from tests.conftest import ApiClient

pytestmark = [
    pytest.mark.django_db,
    # The attacker's HS512 forgery uses our 62-byte key; PyJWT frowns at its length.
    pytest.mark.filterwarnings("ignore:The HMAC key is"),
]


def segment(data: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()


def with_token(consumer: ApiClient, token: str) -> Any:
    return consumer.call("get", "/api/exchange/whoami", HTTP_AUTHORIZATION=f"Bearer {token}")


def signed(
    claims: dict[str, Any], *, key: Any = None, algorithm: str = "HS256", headers: Any = None
) -> str:
    """Signed as the platform signs (the current key, named by its kid) unless told otherwise."""
    return jwt.encode(
        claims,
        settings.JWT_SIGNING_KEY if key is None else key,
        algorithm=algorithm,
        headers={"kid": key_id(settings.JWT_SIGNING_KEY), **(headers or {})},
    )


def test_the_genuine_token_is_accepted(consumer):
    assert with_token(consumer, consumer.tokens["accessToken"]).status_code == 200


@pytest.mark.parametrize(
    "forge",
    [
        pytest.param(
            lambda c: f"{segment({'alg': 'none', 'typ': 'JWT'})}.{segment(c)}.", id="alg-none"
        ),
        pytest.param(
            lambda c: f"{segment({'alg': 'HS256', 'typ': 'JWT'})}.{segment(c)}.",
            id="empty-signature",
        ),
        pytest.param(lambda c: signed(c, algorithm="HS384"), id="hs384-same-key"),
        pytest.param(lambda c: signed(c, algorithm="HS512"), id="hs512-same-key"),
        pytest.param(
            lambda c: signed(
                c,
                key=rsa.generate_private_key(public_exponent=65537, key_size=2048),
                algorithm="RS256",
            ),
            id="rs256-foreign-key",
        ),
        pytest.param(lambda c: signed(c, key=secrets.token_bytes(32)), id="wrong-key"),
        pytest.param(
            lambda c: signed(c, key=b"k" * 32, headers={"jwk": {"kty": "oct", "k": "a2trays"}}),
            id="embedded-jwk",
        ),
        pytest.param(
            lambda c: signed(c, key=b"x" * 32, headers={"kid": "../../etc/passwd"}), id="kid-path"
        ),
        pytest.param(
            lambda c: signed(c, key=b"x" * 32, headers={"kid": "' OR 1=1--"}), id="kid-sql"
        ),
        pytest.param(lambda c: signed({**c, "aud": "another-service"}), id="wrong-audience"),
        pytest.param(lambda c: signed({**c, "iss": "https://evil.example"}), id="wrong-issuer"),
        pytest.param(
            lambda c: signed({k: v for k, v in c.items() if k != "aud"}), id="no-audience"
        ),
        pytest.param(lambda c: signed({k: v for k, v in c.items() if k != "exp"}), id="no-expiry"),
        pytest.param(lambda c: signed({k: v for k, v in c.items() if k != "typ"}), id="no-type"),
        pytest.param(lambda c: signed({k: v for k, v in c.items() if k != "sid"}), id="no-session"),
        pytest.param(lambda c: signed({**c, "typ": "refresh"}), id="typed-as-refresh"),
        pytest.param(lambda c: signed({**c, "sid": "not-a-uuid"}), id="garbage-session"),
    ],
)
def test_forged_tokens_are_401_token_malformed(consumer, forge):
    response = with_token(consumer, forge(claims_of(consumer.tokens["accessToken"])))

    assert response.status_code == 401
    assert response.json()["code"] == "TOKEN_MALFORMED"


def test_a_tampered_payload_with_the_original_signature_is_refused(consumer):
    header, _, signature = consumer.tokens["accessToken"].split(".")
    claims = claims_of(consumer.tokens["accessToken"])
    claims["sub"] = str(int(claims["sub"]) + 1)
    claims["role"] = "USER"

    response = with_token(consumer, f"{header}.{segment(claims)}.{signature}")

    assert (response.status_code, response.json()["code"]) == (401, "TOKEN_MALFORMED")


# Key rotation: the current key signs, a previous key still verifies, a removed key is gone.
CURRENT = "current-signing-key-of-the-attack-tests-0123456789abcdef"
PREVIOUS = "previous-signing-key-of-the-attack-tests-0123456789abcde"
REMOVED = "removed-signing-key-of-the-attack-tests-0123456789abcdef"
ATTACKER = secrets.token_hex(32)


@pytest.fixture
def rotated(settings: Any) -> None:
    """CURRENT signs, PREVIOUS verifies; REMOVED verified once and was taken out."""
    settings.JWT_SIGNING_KEY = CURRENT
    settings.JWT_PREVIOUS_SIGNING_KEYS = (PREVIOUS,)


def kid_signed(claims: dict[str, Any], key: str, kid: Any = None, **headers: Any) -> str:
    """HS256 over a header written by hand, so that kid may be anything (PyJWT would refuse)."""
    header = {"alg": "HS256", "typ": "JWT", **headers}
    if kid is not None:
        header["kid"] = kid
    signing_input = f"{segment(header)}.{segment(claims)}"
    digest = hmac.new(key.encode(), signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{base64.urlsafe_b64encode(digest).rstrip(b'=').decode()}"


ROTATION_FORGERIES = [
    pytest.param(lambda c: kid_signed(c, ATTACKER, key_id(PREVIOUS)), id="previous-kid-forged"),
    pytest.param(lambda c: kid_signed(c, CURRENT, key_id(PREVIOUS)), id="previous-kid-current-key"),
    pytest.param(lambda c: kid_signed(c, PREVIOUS, key_id(CURRENT)), id="current-kid-previous-key"),
    pytest.param(lambda c: kid_signed(c, REMOVED, key_id(REMOVED)), id="removed-key-with-its-kid"),
    pytest.param(lambda c: kid_signed(c, REMOVED), id="removed-key-without-kid"),
    pytest.param(lambda c: kid_signed(c, ATTACKER), id="no-kid-forged"),
    pytest.param(lambda c: kid_signed(c, CURRENT, "../../../../etc/passwd"), id="kid-path"),
    pytest.param(
        lambda c: kid_signed(c, CURRENT, key_id(CURRENT) + "/../" + key_id(PREVIOUS)),
        id="kid-path-after-a-real-kid",
    ),
    pytest.param(lambda c: kid_signed(c, CURRENT, key_id(CURRENT).upper()), id="kid-upper-case"),
    pytest.param(lambda c: kid_signed(c, ATTACKER, ATTACKER), id="kid-carrying-the-key"),
    pytest.param(lambda c: kid_signed(c, CURRENT, ""), id="kid-empty"),
    pytest.param(lambda c: kid_signed(c, CURRENT, 7), id="kid-number"),
    pytest.param(lambda c: kid_signed(c, CURRENT, [key_id(CURRENT)]), id="kid-list"),
    pytest.param(lambda c: kid_signed(c, CURRENT, {"kid": key_id(CURRENT)}), id="kid-object"),
    pytest.param(
        lambda c: kid_signed(
            c, ATTACKER, key_id(CURRENT), jku="https://evil.example/.well-known/jwks.json"
        ),
        id="jku-with-the-current-kid",
    ),
    pytest.param(
        lambda c: kid_signed(
            c,
            ATTACKER,
            key_id(CURRENT),
            jwk={"kty": "oct", "kid": key_id(CURRENT), "k": segment_bytes(ATTACKER.encode())},
        ),
        id="jwk-with-the-current-kid",
    ),
    pytest.param(
        lambda c: kid_signed(c, ATTACKER, key_id(CURRENT), x5u="https://evil.example/cert.pem"),
        id="x5u-with-the-current-kid",
    ),
    pytest.param(
        lambda c: f"{segment({'alg': 'none', 'typ': 'JWT', 'kid': key_id(CURRENT)})}.{segment(c)}.",
        id="alg-none-with-the-current-kid",
    ),
    pytest.param(
        lambda c: jwt.encode(c, CURRENT, algorithm="HS512", headers={"kid": key_id(CURRENT)}),
        id="hs512-current-key-and-kid",
    ),
    pytest.param(
        lambda c: jwt.encode(c, PREVIOUS, algorithm="HS384", headers={"kid": key_id(PREVIOUS)}),
        id="hs384-previous-key-and-kid",
    ),
]


def segment_bytes(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def presented(consumer: ApiClient, kind: str, token: str) -> Any:
    if kind == "access":
        return with_token(consumer, token)
    return consumer.call("post", "/api/auth/refresh", {"refreshToken": token})


@pytest.mark.parametrize("kind", ["access", "refresh"])
@pytest.mark.parametrize(
    "sign",
    [
        pytest.param(lambda c: kid_signed(c, CURRENT, key_id(CURRENT)), id="current"),
        pytest.param(lambda c: kid_signed(c, PREVIOUS, key_id(PREVIOUS)), id="previous"),
        pytest.param(lambda c: kid_signed(c, CURRENT), id="current-without-kid"),
        pytest.param(lambda c: kid_signed(c, PREVIOUS), id="previous-without-kid"),
    ],
)
def test_tokens_signed_with_a_configured_key_are_accepted(rotated, consumer, kind, sign):
    # The control for the forgeries below: the same claims, signed with a key the platform holds.
    response = presented(consumer, kind, sign(claims_of(consumer.tokens[f"{kind}Token"])))

    assert response.status_code == 200, response.content


@pytest.mark.parametrize("kind", ["access", "refresh"])
@pytest.mark.parametrize("forge", ROTATION_FORGERIES)
def test_forgeries_against_rotated_keys_are_401_token_malformed(rotated, consumer, kind, forge):
    response = presented(consumer, kind, forge(claims_of(consumer.tokens[f"{kind}Token"])))

    assert (response.status_code, response.json()["code"]) == (401, "TOKEN_MALFORMED")
    # Refused before the session is looked at: a forged refresh token revokes nothing.
    assert with_token(consumer, consumer.tokens["accessToken"]).status_code == 200


def test_an_expired_token_with_a_valid_signature_is_token_expired(consumer):
    claims = claims_of(consumer.tokens["accessToken"])
    claims["exp"] = int((datetime.now(UTC) - timedelta(seconds=1)).timestamp())

    response = with_token(consumer, signed(claims))

    assert (response.status_code, response.json()["code"]) == (401, "TOKEN_EXPIRED")


def test_a_validly_signed_token_of_an_unknown_session_is_token_revoked(consumer):
    claims = {**claims_of(consumer.tokens["accessToken"]), "sid": str(uuid.uuid4())}

    response = with_token(consumer, signed(claims))

    assert (response.status_code, response.json()["code"]) == (401, "TOKEN_REVOKED")


def test_a_validly_signed_token_naming_another_user_in_the_session_is_token_revoked(consumer):
    claims = claims_of(consumer.tokens["accessToken"])
    claims["sub"] = str(int(claims["sub"]) + 1000)

    response = with_token(consumer, signed(claims))

    assert (response.status_code, response.json()["code"]) == (401, "TOKEN_REVOKED")


def test_a_refresh_token_is_never_an_access_token(consumer):
    response = with_token(consumer, consumer.tokens["refreshToken"])

    assert (response.status_code, response.json()["code"]) == (401, "TOKEN_MALFORMED")


def test_an_access_token_is_never_a_refresh_token(consumer):
    response = consumer.call(
        "post", "/api/auth/refresh", {"refreshToken": consumer.tokens["accessToken"]}
    )

    assert (response.status_code, response.json()["code"]) == (401, "TOKEN_MALFORMED")


@pytest.mark.parametrize(
    "authorization",
    [
        "Bearer",
        "Bearer ",
        "Bearer  two-spaces",
        "Bearer a.b.c extra",
        "Basic dXNlcjpwYXNz",
        "Bearer " + "A" * 5000,
        "Bearer ey\u00e9.x.y",
        "Bearer not.a.jwt",
        "Token abc",
    ],
)
def test_malformed_authorization_headers_fail_closed_with_401(consumer, authorization):
    response = consumer.call("get", "/api/exchange/whoami", HTTP_AUTHORIZATION=authorization)

    assert response.status_code == 401
    assert response.json()["code"] == "TOKEN_MALFORMED"


def test_a_line_break_inside_the_token_is_malformed(consumer):
    token = consumer.tokens["accessToken"]
    broken = token[:40] + "\n" + token[40:]

    response = consumer.call("get", "/api/exchange/whoami", HTTP_AUTHORIZATION=f"Bearer {broken}")

    assert (response.status_code, response.json()["code"]) == (401, "TOKEN_MALFORMED")


def test_issued_tokens_carry_the_documented_claims_and_header(consumer):
    access = claims_of(consumer.tokens["accessToken"])
    refresh = claims_of(consumer.tokens["refreshToken"])

    assert set(access) == {"typ", "sub", "sid", "jti", "role", "iat", "exp", "iss", "aud"}
    assert (access["typ"], refresh["typ"]) == ("access", "refresh")
    assert access["sid"] == refresh["sid"]
    assert access["jti"] != refresh["jti"]
    assert (access["iss"], access["aud"], access["role"]) == (
        "exchange-platform",
        "exchange-platform",
        "ADAPTER",
    )
    assert jwt.get_unverified_header(consumer.tokens["accessToken"]) == {
        "alg": "HS256",
        "kid": key_id(settings.JWT_SIGNING_KEY),
        "typ": "JWT",
    }


PAST = int((datetime.now(UTC) - timedelta(days=1)).timestamp())
FUTURE = int((datetime.now(UTC) + timedelta(days=1)).timestamp())
ABSURD = [
    1e20,
    -1e20,
    2**70,
    float("inf"),
    float("-inf"),
    float("nan"),
    1.5,
    "x",
    [1],
    {"a": 1},
    None,
    True,
]


def absurd_claims() -> list[Any]:
    """(claim, value, codes it may answer): values PyJWT may let through to simplejwt."""
    malformed, either = {"TOKEN_MALFORMED"}, {"TOKEN_MALFORMED", "TOKEN_EXPIRED"}
    cases = [
        pytest.param("exp", str(FUTURE), malformed, id="exp-numeric-string-future"),
        pytest.param("exp", str(PAST), either, id="exp-numeric-string-past"),
        pytest.param("iat", str(PAST), malformed, id="iat-numeric-string"),
        pytest.param("nbf", PAST, malformed, id="nbf-past"),
    ]
    for claim in ("exp", "iat", "nbf"):
        for value in ABSURD:
            # An exp in the past, however it is written, may say so.
            past = claim == "exp" and value in (-1e20, float("-inf"), 1.5, True)
            cases.append(
                pytest.param(claim, value, either if past else malformed, id=f"{claim}-{value!r}")
            )
    return cases


@pytest.mark.parametrize(("claim", "value", "codes"), absurd_claims())
@pytest.mark.parametrize("kind", ["access", "refresh"])
def test_absurd_time_claims_in_a_correctly_signed_token_are_401_never_500(
    consumer, claim, value, codes, kind
):
    claims = claims_of(consumer.tokens[f"{kind}Token"])
    claims[claim] = value

    response = presented(consumer, kind, signed(claims))

    assert response.status_code == 401, response.content
    assert response["Content-Type"] == "application/problem+json"
    assert response.json()["code"] in codes


def test_an_unreadable_refresh_token_is_named_as_such(consumer: ApiClient) -> None:
    response = consumer.call("post", "/api/auth/refresh", {"refreshToken": "not-a-jwt"})

    assert (response.status_code, response.json()["code"]) == (401, "TOKEN_MALFORMED")
    assert response.json()["detail"].startswith("The refresh token cannot be read")


FOREIGN_SHAPES: list[Any] = [5, -1, 1.5, [1], {"a": 1}, None, True, "", "not ours", "٣", "1" * 40]


def foreign_identity_claims() -> list[Any]:
    """(claim, value): a shape token_pair_issue never writes for sub, sid, jti or role, or the
    claim left out."""
    cases = [
        pytest.param(claim, value, id=f"{claim}-{value!r}")
        for claim in ("sub", "sid", "jti", "role")
        for value in FOREIGN_SHAPES
        # A text sub of digits names a user, and a text jti is any id: those are accepted shapes.
        if not (claim == "jti" and isinstance(value, str) and 0 < len(value) <= 64)
    ]
    cases += [
        pytest.param(claim, MISSING, id=f"{claim}-missing") for claim in ("sub", "sid", "jti")
    ]
    cases.append(pytest.param("role", "ADMIN", id="role-unknown"))
    return cases


MISSING = object()


@pytest.mark.parametrize(("claim", "value"), foreign_identity_claims())
@pytest.mark.parametrize("kind", ["access", "refresh"])
def test_identity_claims_of_a_shape_that_is_not_ours_are_401_token_malformed_never_500(
    consumer, claim, value, kind
):
    claims = claims_of(consumer.tokens[f"{kind}Token"])
    if value is MISSING:
        del claims[claim]
    else:
        claims[claim] = value

    response = presented(consumer, kind, signed(claims))

    assert (response.status_code, response.json()["code"]) == (401, "TOKEN_MALFORMED"), (
        response.content
    )
