"""docs/users-api.md is true: every request it shows is sent, in the order of the page, and every
answer it shows is what the platform answers, field for field.

The guide's conventions (its "Reading the examples"): ``<name>`` in an answer matches any value and
remembers it under ``name`` (quoted: a string; unquoted: a number); in a request it is the value
remembered last. ``<code sent to ADDRESS>`` is the code in the newest e-mail or SMS to ADDRESS.
``…`` inside a string matches any characters. Everything else is exact. The clock starts at
2026-11-21T09:30:00Z and stands still; it moves only where the guide says so (PREPARATIONS below).
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http import HTTPStatus
from typing import Any

import pyotp
import pytest
from django.utils import timezone
from time_machine import TimeMachineFixture

from accounts.api.urls import urlpatterns
from accounts.models import OutboxMessage, Session, User
from accounts.services.accounts import (
    account_require_password_change,
    account_set_active,
    account_unlock,
)
from tests.conftest import ROOT, ApiClient, last_code

pytestmark = pytest.mark.django_db

GUIDE = ROOT / "docs/users-api.md"
START = datetime(2026, 11, 21, 9, 30, tzinfo=UTC)

# An example: its name in an HTML comment, the request in an http block, the answer in the next.
EXAMPLE = re.compile(
    r"^<!-- example: (?P<name>[\w-]+) -->\n"
    r"```http\n(?P<request>.*?)^```\n\s*"
    r"```http\n(?P<response>HTTP/1\.1 .*?)^```$",
    re.M | re.S,
)
HTTP_BLOCK = re.compile(r"^```http$", re.M)
PLACEHOLDER = re.compile(r"<([A-Za-z][^<>\"\n]*)>")
CODE = re.compile(r"code sent to (\S+)")
# A JSON string, or a placeholder outside of one (a number).
JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|<[A-Za-z][^<>"\n]*>')
BARE = "\x00"  # marks a placeholder that stood outside quotes
ELLIPSIS = "…"

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
JWT = re.compile(r"[\w-]+\.[\w-]+\.[\w-]+")
# A device token: Django's signing (payload:timestamp:signature), not a JWT (docs/sessions.md).
SIGNED = re.compile(r"[\w-]+:[\w-]+:[\w-]+")


@dataclass(frozen=True)
class Example:
    name: str
    line: int
    method: str
    path: str
    headers: dict[str, str]
    body: str | None
    status: int
    reason: str
    response_headers: dict[str, str]
    response_body: str | None


def _head_and_body(block: str) -> tuple[list[str], str | None]:
    head, _, body = block.strip("\n").partition("\n\n")
    return head.splitlines(), (body.strip() or None)


def _header_lines(lines: list[str]) -> dict[str, str]:
    headers = {}
    for line in lines:
        name, colon, value = line.partition(": ")
        assert colon, f"not a header line: {line!r}"
        headers[name] = value
    return headers


def examples_of(text: str) -> list[Example]:
    examples = []
    for match in EXAMPLE.finditer(text):
        request_head, request_body = _head_and_body(match["request"])
        method, path = request_head[0].split(" ")
        response_head, response_body = _head_and_body(match["response"])
        _, status, reason = response_head[0].split(" ", 2)
        examples.append(
            Example(
                name=match["name"],
                line=text.count("\n", 0, match.start()) + 1,
                method=method,
                path=path,
                headers=_header_lines(request_head[1:]),
                body=request_body,
                status=int(status),
                reason=reason,
                response_headers=_header_lines(response_head[1:]),
                response_body=response_body,
            )
        )
    return examples


def _json_with_bare_placeholders(text: str) -> Any:
    """JSON in which an unquoted ``<name>`` becomes the string BARE + name."""

    def quote(match: re.Match[str]) -> str:
        token = match.group(0)
        return token if token.startswith('"') else json.dumps(BARE + token[1:-1])

    return json.loads(JSON_TOKEN.sub(quote, text))


@dataclass
class Replay:
    client: ApiClient
    clock: TimeMachineFixture
    settings: Any
    values: dict[str, Any] = field(default_factory=dict)

    def later(self, seconds: int) -> None:
        self.clock.shift(timedelta(seconds=seconds))

    # --- requests ---------------------------------------------------------------------------

    def value(self, name: str) -> Any:
        code = CODE.fullmatch(name)
        if code:
            return last_code(code.group(1))
        if name == "code shown by the app":  # at the guide's clock, from the secret it showed
            return pyotp.TOTP(self.values["secret"]).now()
        assert name in self.values, f"<{name}> is used before an answer showed it"
        return self.values[name]

    def _substituted(self, text: str) -> str:
        return PLACEHOLDER.sub(lambda match: str(self.value(match.group(1))), text)

    def _request_value(self, shown: Any) -> Any:
        if isinstance(shown, dict):
            return {key: self._request_value(item) for key, item in shown.items()}
        if isinstance(shown, list):
            return [self._request_value(item) for item in shown]
        if isinstance(shown, str) and shown.startswith(BARE):
            return self.value(shown[1:])
        if isinstance(shown, str):
            whole = PLACEHOLDER.fullmatch(shown)
            return self.value(whole.group(1)) if whole else self._substituted(shown)
        return shown

    def send(self, example: Example) -> Any:
        assert ELLIPSIS not in (example.body or ""), "a request is sent as shown: no …"
        body = (
            None
            if example.body is None
            else self._request_value(_json_with_bare_placeholders(example.body))
        )
        meta = {
            "HTTP_" + name.upper().replace("-", "_"): self._substituted(value)
            for name, value in example.headers.items()
        }
        return self.client.call(
            example.method.lower(), self._substituted(example.path), body, **meta
        )

    # --- answers ----------------------------------------------------------------------------

    def _match_string(self, shown: str, actual: str, seen: dict[str, Any], where: str) -> None:
        names: list[str] = []
        pattern = ""
        for part in re.split(r"(<[A-Za-z][^<>\"\n]*>|…)", shown):
            if part == ELLIPSIS:
                pattern += ".*"
            elif PLACEHOLDER.fullmatch(part):
                names.append(part[1:-1])
                pattern += "(.+)"
            else:
                pattern += re.escape(part)
        match = re.fullmatch(pattern, actual, re.S)
        assert match, f"{where}: {actual!r} is not {shown!r}"
        for name, captured in zip(names, match.groups(), strict=True):
            self._bind(name, captured, seen, where)

    def _bind(self, name: str, actual: Any, seen: dict[str, Any], where: str) -> None:
        lowered = name.lower()
        if isinstance(actual, str) and lowered.endswith(("requestid", "sessionid")):
            assert UUID.fullmatch(actual), f"{where}: <{name}> is not a UUID: {actual!r}"
        if isinstance(actual, str) and lowered.endswith("devicetoken"):
            assert SIGNED.fullmatch(actual), f"{where}: <{name}> is not signed: {actual!r}"
        elif isinstance(actual, str) and lowered.endswith("token"):
            assert JWT.fullmatch(actual), f"{where}: <{name}> is not a JWT: {actual!r}"
        if name in seen:  # one name, one value within an answer (Retry-After and its body twin)
            assert str(seen[name]) == str(actual), f"{where}: <{name}> differs within the answer"
        seen[name] = actual

    def match(self, shown: Any, actual: Any, seen: dict[str, Any], where: str) -> None:
        if isinstance(shown, str) and shown.startswith(BARE):
            assert type(actual) is int, f"{where}: {actual!r} is not a number"
            self._bind(shown[1:], actual, seen, where)
        elif isinstance(shown, str) and (PLACEHOLDER.search(shown) or ELLIPSIS in shown):
            assert isinstance(actual, str), f"{where}: {actual!r} is not a string"
            self._match_string(shown, actual, seen, where)
        elif isinstance(shown, dict):
            assert isinstance(actual, dict), f"{where}: {actual!r} is not an object"
            assert sorted(actual) == sorted(shown), (
                f"{where}: members {sorted(actual)} are not {sorted(shown)}"
            )
            for key, item in shown.items():
                self.match(item, actual[key], seen, f"{where}.{key}")
        elif isinstance(shown, list):
            assert isinstance(actual, list), f"{where}: {actual!r} is not a list"
            assert len(actual) == len(shown), f"{where}: {actual!r} is not {shown!r}"
            for index, (item, actual_item) in enumerate(zip(shown, actual, strict=True)):
                self.match(item, actual_item, seen, f"{where}[{index}]")
        else:
            # type too: true is not 1
            assert (type(actual), actual) == (type(shown), shown), (
                f"{where}: {actual!r} is not {shown!r}"
            )

    def check(self, example: Example, response: Any) -> None:
        where = f"docs/users-api.md:{example.line} ({example.name})"
        content = response.content.decode()
        assert (response.status_code, response.reason_phrase) == (
            example.status,
            example.reason,
        ), f"{where}: answered {response.status_code} {content}"
        assert HTTPStatus(example.status).phrase == example.reason, where
        expected_type = "application/problem+json" if example.status >= 400 else "application/json"
        assert response["Content-Type"] == expected_type, where
        seen: dict[str, Any] = {}
        for name, shown in example.response_headers.items():
            assert response.has_header(name), f"{where}: no {name} header"
            self._match_string(shown, response[name], seen, f"{where} {name}")
        assert example.response_body is not None, f"{where}: the answer shows no body"
        try:
            self.match(
                _json_with_bare_placeholders(example.response_body),
                json.loads(content),
                seen,
                where,
            )
        except AssertionError as error:
            raise AssertionError(f"{error}\nthe whole answer: {content}") from None
        self.values.update(seen)


# --- what the guide's prose says happens between two examples -------------------------------

Preparation = Callable[[Replay], AbstractContextManager[None]]
PREPARATIONS: dict[str, Preparation] = {}


def preparation(name: str) -> Callable[[Callable[[Replay], Iterator[None]]], Preparation]:
    def register(function: Callable[[Replay], Iterator[None]]) -> Preparation:
        PREPARATIONS[name] = contextmanager(function)
        return PREPARATIONS[name]

    return register


def ada() -> User:
    return User.objects.get(email="ada@example.com")


def newest_template(to: str) -> str:
    message = OutboxMessage.objects.filter(to__iexact=to).order_by("-pk").first()
    assert message is not None
    return message.template


@preparation("register-prevent-enumeration")
def _prevent_enumeration(replay: Replay) -> Iterator[None]:
    replay.settings.ACCOUNTS_PREVENT_ENUMERATION = True
    yield
    replay.settings.ACCOUNTS_PREVENT_ENUMERATION = False
    # The owner is mailed; the decoy code is queued like a real one, for nobody (skipped).
    mailed = OutboxMessage.objects.filter(to="ada@example.com").order_by("-pk")[:2]
    assert [(message.template, message.user_id is None) for message in mailed] == [
        ("registration_code", True),
        ("email_taken", False),
    ]


@preparation("verify-email-resend")
def _a_minute_later(replay: Replay) -> Iterator[None]:
    replay.later(60)
    yield


@preparation("bob-code-expired")
def _ten_minutes_later(replay: Replay) -> Iterator[None]:
    replay.later(600)
    yield


@preparation("bob-last-attempt")
def _two_more_wrong_codes(replay: Replay) -> Iterator[None]:
    for remaining in (2, 1):
        wrong = replay.client.call(
            "post",
            "/api/auth/register/verify-email/confirm",
            {"requestId": replay.values["bobRequestId"], "token": "000000"},
        )
        assert (wrong.status_code, wrong.json()["attemptsRemaining"]) == (400, remaining)
    yield


@preparation("me-update")
def _a_first_phone_is_not_mailed(replay: Replay) -> Iterator[None]:
    yield
    assert newest_template("ada@example.com") != "phone_changed"


@preparation("sign-in-locked")
def _five_wrong_passwords(replay: Replay) -> Iterator[None]:
    for _ in range(5):
        wrong = replay.client.call(
            "post", "/api/auth/login/email", {"email": "ada@example.com", "password": "wrong"}
        )
        assert wrong.json()["code"] == "BAD_CREDENTIALS"
    yield
    account_unlock(user=ada(), actor=None)


@preparation("sign-in-disabled")
def _disabled(replay: Replay) -> Iterator[None]:
    account_set_active(user=ada(), active=False)
    yield
    account_set_active(user=ada(), active=True)


@preparation("sign-in-credentials-expired")
def _credentials_expired(replay: Replay) -> Iterator[None]:
    User.objects.filter(pk=ada().pk).update(credentials_expire_at=timezone.now())
    yield
    User.objects.filter(pk=ada().pk).update(credentials_expire_at=None)


@preparation("sign-in-two-factor-resend")
def _a_minute_later_again(replay: Replay) -> Iterator[None]:
    replay.later(60)
    yield


@preparation("two-factor-disable")
def _disabling_is_mailed(replay: Replay) -> Iterator[None]:
    yield
    assert newest_template("ada@example.com") == "notice_two_factor_disabled"


@preparation("sign-in-phone")
def _five_minutes_later(replay: Replay) -> Iterator[None]:
    replay.later(300)
    yield


@preparation("change-password")
def _signed_in_on_the_phone_again(replay: Replay) -> Iterator[None]:
    phone = replay.client.call(
        "post",
        "/api/auth/login/email",
        {"email": "ada@example.com", "password": "a-long-and-unusual-passphrase"},
        HTTP_X_DEVICE_ID="ada-phone",
    )
    assert phone.status_code == 200, phone.json()
    replay.values["phoneAccessToken"] = phone.json()["accessToken"]
    yield
    live = Session.objects.filter(user=ada(), revoked_at__isnull=True)
    assert [session.device_id for session in live] == [""]  # this laptop's new session only


@preparation("refresh-reused")
def _a_minute_after_the_refresh(replay: Replay) -> Iterator[None]:
    replay.later(60)
    yield


@preparation("reset-password-resend")
def _a_minute_after_the_reset(replay: Replay) -> Iterator[None]:
    replay.later(60)
    yield
    assert newest_template("ada@example.com") == "password_reset_code"


@preparation("reset-password-unknown")
def _nothing_goes_to_unknown_addresses(replay: Replay) -> Iterator[None]:
    yield
    assert OutboxMessage.objects.filter(to="nobody@example.com", user=None).exists()
    # Queued like any other, skipped when sent: see "How codes travel".
    assert OutboxMessage.objects.get(to="nobody@example.com").requires_account


@preparation("sign-in-password-change-required")
def _administrator_requires_a_new_password(replay: Replay) -> Iterator[None]:
    account_require_password_change(user=ada(), actor=None)
    yield


@preparation("rate-limit-headers")
def _a_fresh_minute(replay: Replay) -> Iterator[None]:
    replay.later(60)
    yield


@preparation("rate-limited")
def _nineteen_more_on_two_endpoints(replay: Replay) -> Iterator[None]:
    password = "a-long-and-unusual-passphrase"
    for remaining in range(18, -1, -1):
        if remaining % 2:
            answer = replay.client.call(
                "post",
                "/api/auth/register",
                {"email": "ADA@example.com", "password": password, "confirmPassword": password},
            )
        else:
            answer = replay.client.call(
                "post", "/api/auth/reset-password", {"email": "ada@example.com"}
            )
        status = 409 if remaining % 2 else 200
        assert (answer.status_code, answer["X-Rate-Limit-Remaining"]) == (status, str(remaining))
    yield


@preparation("totp-start")
def _a_minute_after_the_rate_limit(replay: Replay) -> Iterator[None]:
    replay.later(60)
    yield


@preparation("totp-confirm")
def _enabling_the_app_is_mailed(replay: Replay) -> Iterator[None]:
    yield
    assert newest_template("ada@example.com") == "notice_two_factor_enabled"


@preparation("sign-in-totp-confirm")
def _thirty_seconds_later(replay: Replay) -> Iterator[None]:
    replay.later(30)
    yield


@preparation("sign-in-recovery-start")
def _a_minute_after_the_app_sign_in(replay: Replay) -> Iterator[None]:
    replay.later(60)
    yield


@preparation("sign-in-recovery")
def _the_recovery_code_and_the_new_device_are_mailed(replay: Replay) -> Iterator[None]:
    yield
    notices = OutboxMessage.objects.filter(to="ada@example.com").order_by("-pk")[:2]
    assert {message.template for message in notices} == {
        "notice_recovery_code_used",
        "notice_new_device_sign_in",
    }


@preparation("recovery-code-reused")
def _signed_in_again_on_the_laptop(replay: Replay) -> Iterator[None]:
    again = replay.client.call(
        "post",
        "/api/auth/login/email",
        {"email": "ada@example.com", "password": "a-fourth-long-unusual-passphrase"},
        HTTP_X_DEVICE_ID="borrowed-laptop",
    )
    assert again.status_code == 428, again.json()
    replay.values["laptopRequestId"] = again.json()["requestId"]
    yield


@contextmanager
def nothing(replay: Replay) -> Iterator[None]:
    yield


# --- the configuration table -------------------------------------------------------------------

KNOB_ROW = re.compile(r"^\| `([A-Z][A-Z_]+)` \| ([^|]+?) \|", re.M)
SOURCE_DEFAULT = r'env_\w+\(\s*"{name}",\s*([^,)]+)'


def documented_defaults(text: str) -> dict[str, Any]:
    """The guide's configuration table: variable -> default (`900`, `false`, `60/m`, empty)."""
    defaults: dict[str, Any] = {}
    for name, cell in KNOB_ROW.findall(text):
        literal = re.match(r"`([^`]*)`", cell.strip())
        value = literal.group(1) if literal else ""
        if value in ("true", "false"):
            defaults[name] = value == "true"
        elif value.isdigit():
            defaults[name] = int(value)
        else:
            defaults[name] = value
    return defaults


def test_the_configuration_table_gives_the_defaults_of_settings_py():
    defaults = documented_defaults(GUIDE.read_text())
    source = (ROOT / "platform_site/settings.py").read_text()

    assert len(defaults) >= 15
    for name, documented in defaults.items():
        found = re.search(SOURCE_DEFAULT.format(name=name), source)
        assert found, f"{name} is not read in platform_site/settings.py"
        assert ast.literal_eval(found.group(1)) == documented, name


def test_the_guide_names_every_endpoint_of_a_cabinet_user():
    text = GUIDE.read_text()
    routes = [
        "/api/" + re.sub(r"<\w+:(\w+)>", "{id}", str(pattern.pattern))
        for pattern in urlpatterns
        if "adapters" not in str(pattern.pattern)
    ]

    assert len(routes) == 31
    assert [route for route in routes if f"`{route}`" not in text] == []
    assert "[docs/users-api.md](docs/users-api.md)" in (ROOT / "README.md").read_text()


def test_every_example_in_the_guide_is_what_the_api_answers(
    settings: Any, time_machine: TimeMachineFixture
):
    text = GUIDE.read_text()
    examples = examples_of(text)
    names = [example.name for example in examples]
    assert len(HTTP_BLOCK.findall(text)) == 2 * len(examples), "an http block outside an example"
    assert len(set(names)) == len(names), "two examples with one name"
    assert set(PREPARATIONS) <= set(names), set(PREPARATIONS) - set(names)
    for name, default in documented_defaults(text).items():
        if name.startswith(("ACCOUNTS_", "JWT_", "SESSION_")):
            setattr(settings, name, default)  # the guide's answers assume the defaults
    time_machine.move_to(START, tick=False)
    replay = Replay(client=ApiClient(), clock=time_machine, settings=settings)

    checked = 0
    for example in examples:
        with PREPARATIONS.get(example.name, nothing)(replay):
            replay.check(example, replay.send(example))
        checked += 1

    assert checked == len(examples) == text.count("<!-- example: ")
    assert checked >= 50
