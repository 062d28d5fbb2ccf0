"""Schemathesis against the live platform: every operation of /api/schema/, sent valid and invalid
requests, answers as its schema and the docs say (docs/errors.md, docs/sessions.md,
docs/exchange.md).

The server is real gunicorn with two workers over a private PostgreSQL, and the schema is the one
it serves. Each operation gets the coverage phase's boundary cases and FUZZ_EXAMPLES generated
requests, derandomized (the same cases on every run; SEED for whatever still draws), and every
answer passes the six checks of CHECKS: no server error, a documented status, a documented content
type, a body matching its schema, invalid data rejected, valid data accepted; and a seventh,
problem_code_conformance: a problem's code (and its members) is one that the operation's response
for its status names. The batch send answers 200 with a result per message and fails a message
that breaks the schema alone, so batch_messages_rejected_alone takes negative_data_rejection's
place there: every message that breaks the schema is failed with a 4xx. pytest reports one subtest
per operation; a failure names the check and shows the answer and a curl command that repeats the
request. Under a minute on two cores.

Each operation runs as the principal docs/sessions.md gives it: /api/exchange/* as a signed-in adapter
whose queue is stocked (a long poll answers at once, a push stream sends a message at once, which
is all of a stream the fuzzer reads), /api/users/* as a cabinet user with a
confirmed e-mail, a complete profile and adapters to manage, /api/auth/* without a token. Half of
the generated ids are real ones (fuzzer_config), so the operations on one adapter or message reach
it instead of answering 404. Sessions are bound to DEVICE, which a valid X-Device-ID the fuzzer
makes up is replaced by (bearer_auth): otherwise nearly every exchange case is 401 DEVICE_MISMATCH.

Nothing is excluded, and the fuzzer never ends a session it runs on: its adapter belongs to another
owner, so the cabinet user's rotations, disablings and deletions of adapters cannot reach it; logout
and refresh take refresh tokens, which the fuzzer never sees; a password change needs the current
password, which it never sees either. Only ``DELETE /api/users/sessions/{session_id}`` can end a
session it holds (the ids are in ``GET /api/users/sessions``, whose answers it reuses), so that one
runs as a cabinet user of its own, signed in afresh for every request.

What JSON Schema cannot say is configured here, each with its reason: LOCKED (the fuzzer's own
wrong passwords lock accounts), CONTRACT_REJECTIONS and UNSTATABLE_RULES (schema-valid requests the
contract refuses), repeat_the_new_password (a rule between two fields), and the generation
settings of CONFIG.
"""

from __future__ import annotations

import json
import logging
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, cast

import httpx
import jsonschema
import psycopg
import pytest
import schemathesis
from schemathesis.core.result import Ok
from schemathesis.openapi.checks import RejectedPositiveData
from schemathesis.specs.openapi.checks import negative_data_rejection
from schemathesis.specs.openapi.schemas import OpenApiSchema

from platform_site.errors import PROBLEM_CONTENT_TYPE
from tests.problem_answers import PROBLEM_MEMBERS, undeclared_answer
from tests.stack.conftest import Gunicorn, StackDatabase
from tests.stack.processes import running_gunicorn

pytestmark = pytest.mark.stack

SEED = 20261121
# Generated requests per operation, on top of the coverage phase's fixed boundary cases.
FUZZ_EXAMPLES = 20
CHECKS = (
    "not_a_server_error",
    "status_code_conformance",
    "content_type_conformance",
    "response_schema_conformance",
    "negative_data_rejection",
    "positive_data_acceptance",
)
# 423 ACCOUNT_LOCKED answers any request that carries a password for a locked account
# (docs/users-api.md, section 5; documented on those operations), whatever else is wrong with it:
# the fuzzer types wrong passwords for the logins it reads in answers, and locks them.
LOCKED = "423"
POSITIVE_DATA_STATUSES = ["2xx", "3xx", "401", "403", "404", "409", LOCKED, "429", "5xx"]
NEGATIVE_DATA_STATUSES = [
    "400", "401", "403", "404", "405", "406", "409", "415", "422", LOCKED, "428", "429", "5xx",
]  # fmt: skip
# Problem codes the platform answers a schema-valid request with (docs/errors.md), because what is
# wrong is not in the request's shape: positive_data_acceptance does not count them as valid data
# rejected.
CONTRACT_REJECTIONS = {
    # A confirmation code or requestId the fuzzer cannot know (docs/users-api.md, section 2).
    "CODE_INVALID",
    "CODE_EXPIRED",
    "CODE_ALREADY_USED",
    # Turning on two-factor sign-in needs a phone, which the fuzzer may just have removed with
    # PATCH /api/users/me (docs/users-api.md, section 4).
    "PHONE_REQUIRED",
    # A passkey's attestation or assertion is signed by an authenticator the fuzzer does not have
    # (docs/users-api.md, "Passkeys").
    "PASSKEY_INVALID",
    # A route from one of the owner's own adapters, which need none (docs/exchange.md, "Routes"):
    # a rule between the path's adapter and the body's sender.
    "ROUTE_NOT_NEEDED",
}
# VALIDATION_FAILED messages for rules JSON Schema cannot state: a 400 whose messages are all of
# these is not valid data rejected either. Lengths, patterns and required fields are not here: the
# schema can say them.
UNSTATABLE_RULES = {
    # The fuzzer never knows the current password.
    "The current password is wrong.",
    # Django's password validators beyond the length (docs/users-api.md, section 1).
    "This password is too common.",
    "This password is entirely numeric.",
    # phonenumbers decides whether a number exists.
    "Enter a phone number in international format, such as +4915112345678.",
    # OpenAPI 3.0 has no propertyNames to bound the names of a message's headers.
    "Header names are 1 to 64 characters.",
    # Exactly one of senderLogin and senderAdapterId; at least one of an adapter's active and
    # displayName (OpenAPI 3.0's schemas cannot say "one of these members" without oneOf).
    "Send either senderLogin or senderAdapterId.",
    "Send active, displayName or both.",
    # Exactly one of a second step's token and credential; a passkey's answer with the requestId
    # of its options (docs/users-api.md, sections 15a and 15c).
    "Send either token (a code) or credential (a passkey's answer).",
    "A passkey's answer needs the requestId its options came with.",
    # A second factor the person holds: the account's state, not the request's shape.
    "This is not one of your second factors.",
    # A new e-mail address that is the account's own already (docs/users-api.md, section 15b), or
    # one whose characters stand for others once normalised (NFKC: accounts.identifiers).
    "This is your address already.",
    "Type the address in plain characters: it contains characters that stand for others "
    "(such as the Kelvin sign, a long s, full-width letters or ß).",
    # A topic's grant to one of its owner's own adapters: a rule between the path and the body.
    "Your own adapters may publish to and subscribe to your topics already.",
    # A webhook's URL: the schema's pattern says http(s) and printable ASCII; https alone is a
    # setting's rule (EXCHANGE_WEBHOOK_ALLOW_PRIVATE), the rest the address's: an authority a
    # URL parser accepts, a host name of DNS labels, no credentials, a public address.
    "Enter an https:// URL.",
    "Enter a valid URL.",
    "Enter a valid host name.",
    "Credentials in the URL are not accepted: authenticate by the signature.",
    "The address is private, loopback, link-local or multicast.",
}
UNSTATABLE_PREFIXES = ("The password is too similar to the ",)
CONFIG: dict[str, Any] = {
    "seed": SEED,
    "generation": {
        "deterministic": True,
        "max-examples": FUZZ_EXAMPLES,
        # Nothing written into the checkout; a failure reproduces from the seed alone.
        "database": "none",
        # A NUL is 400 MALFORMED_JSON (docs/users-api.md, conventions): PostgreSQL text cannot hold one,
        # and JSON Schema's strings cannot exclude it.
        "allow-x00": False,
    },
    "checks": {
        "enabled": False,
        **{name: {"enabled": True} for name in CHECKS},
        "positive_data_acceptance": {"enabled": True, "expected-statuses": POSITIVE_DATA_STATUSES},
        "negative_data_rejection": {"enabled": True, "expected-statuses": NEGATIVE_DATA_STATUSES},
    },
    # The tokens are this run's own: a failure shows the exact request to repeat.
    "output": {"sanitization": {"enabled": False}},
    # Above the longest long poll (20 s).
    "request-timeout": 30,
    # A push stream never ends by itself: its first message (the queue is stocked) is enough.
    "max-stream-events": 1,
}
# Of each generated id, the share replaced by a real one.
REAL_ID_SHARE = 0.5

PASSWORD = "a-long-and-unusual-passphrase"
DEVICE = "schemathesis"
ADAPTER = "fuzzed-adapter"
CABINET_USER = "fuzzed-user@example.com"
# Signs in afresh for every DELETE /api/users/sessions/{session_id} (see the module docstring).
SESSION_ENDER = "session-ender@example.com"
CABINET_ADAPTERS = 5
# Enough that the fuzzer's ACKs and delayed NACKs never empty the queue.
STOCKED_MESSAGES = 1000
KNOWN_MESSAGES = 20


@pytest.fixture(scope="module")
def live_platform(
    stack_database: StackDatabase, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Gunicorn]:
    """gunicorn out of the fuzzer's way: every request comes from 127.0.0.1 for a few principals,
    so the default rate limits would answer 429 instead; and a message the fuzzer receives again
    and again never reaches the dead letters, so its queue never runs dry."""
    env = {
        "ACCOUNTS_RATE_LIMIT_IP": "1000000/m",
        "ACCOUNTS_RATE_LIMIT_ACCOUNT": "1000000/m",
        "ACCOUNTS_RATE_LIMIT_USER": "1000000/m",
        "EXCHANGE_RATE_LIMIT": "1000000/m",
        "EXCHANGE_MAX_DELIVERIES": "1000000",
    }
    with running_gunicorn(stack_database, tmp_path_factory.mktemp("schemathesis"), env) as server:
        yield server


@dataclass(frozen=True)
class Principal:
    identifier: str
    login_path: str
    login_field: str

    def sign_in(self, base_url: str) -> str:
        answer = httpx.post(
            f"{base_url}{self.login_path}",
            json={self.login_field: self.identifier, "password": PASSWORD},
            headers={"X-Device-ID": DEVICE},
            timeout=30,
        )
        assert answer.status_code == 200, answer.text
        token: str = answer.json()["accessToken"]
        return token


ADAPTER_PRINCIPAL = Principal(ADAPTER, "/api/auth/login/username", "username")
CABINET_PRINCIPAL = Principal(CABINET_USER, "/api/auth/login/email", "email")
SESSION_ENDER_PRINCIPAL = Principal(SESSION_ENDER, "/api/auth/login/email", "email")


@dataclass(frozen=True)
class World:
    """The real ids the fuzzer draws from."""

    cabinet_adapter_ids: list[int]
    # For DELETE /api/users/adapters/{adapter_id} alone, so the others keep theirs.
    doomed_adapter_ids: list[int]
    message_ids: list[str]
    # The cabinet user's topics, the fuzzed adapter a publisher of the first; the doomed ones for
    # DELETE /api/users/topics/{topic_id} alone.
    topic_ids: list[int]
    doomed_topic_ids: list[int]


def create_world(database: StackDatabase) -> World:
    """The cabinet users (the fuzzed one with adapters to manage), and the fuzzed adapter under an
    owner of its own, with a stocked queue."""
    created = json.loads(
        database.shell(
            "import json\n"
            "from accounts.models import User\n"
            "from accounts.services.adapters import adapter_create\n"
            "def cabinet_user(email):\n"
            "    return User.objects.create_user(\n"
            f"        username=email.split('@')[0], email=email, password={PASSWORD!r},\n"
            "        first_name='Ada', last_name='Lovelace', phone='+4915112345678',\n"
            "        email_confirmed=True,\n"
            "    )\n"
            f"user = cabinet_user({CABINET_USER!r})\n"
            f"adapter_ids = [adapter_create(owner=user).adapter_id for _ in range({2 * CABINET_ADAPTERS})]\n"
            f"cabinet_user({SESSION_ENDER!r})\n"
            "owner = cabinet_user('adapter-owner@example.com')\n"
            "adapter = User.objects.create_user(\n"
            f"    username={ADAPTER!r}, password={PASSWORD!r}, kind=User.Kind.ADAPTER, owner=owner\n"
            ")\n"
            "from exchange.models import Topic, TopicPublisher\n"
            "topic_ids = [Topic.objects.create(owner=user, name=f'topic-{n}').pk for n in range(4)]\n"
            "TopicPublisher.objects.create(topic_id=topic_ids[0], adapter=adapter)\n"
            "print(json.dumps(\n"
            "    {'adapter': adapter.pk, 'cabinet_adapters': adapter_ids, 'topics': topic_ids}\n"
            "))\n"
        )
    )
    with psycopg.connect(database.url, autocommit=True) as conn:
        stocked = conn.execute(
            "INSERT INTO exchange_message (message_id, recipient_id, type, payload, headers, receive_count) "
            "SELECT gen_random_uuid(), %s, 'stock', jsonb_build_object('n', n), '{}', 0 "
            "FROM generate_series(1, %s) AS n RETURNING message_id",
            [created["adapter"], STOCKED_MESSAGES],
        ).fetchall()
    adapter_ids: list[int] = created["cabinet_adapters"]
    return World(
        cabinet_adapter_ids=adapter_ids[:CABINET_ADAPTERS],
        doomed_adapter_ids=adapter_ids[CABINET_ADAPTERS:],
        message_ids=[str(message_id) for (message_id,) in stocked[:KNOWN_MESSAGES]],
        topic_ids=created["topics"][:2],
        doomed_topic_ids=created["topics"][2:],
    )


def fuzzer_config(world: World) -> schemathesis.Config:
    """CONFIG, with REAL_ID_SHARE of the generated ids drawn from ``world`` (schemathesis'
    dictionaries: a valid case stays valid, an invalid one invalid)."""

    def real(dictionary: str) -> dict[str, Any]:
        return {"dictionary": dictionary, "probability": REAL_ID_SHARE}

    return schemathesis.Config.from_dict(
        {
            **CONFIG,
            "dictionaries": {
                "adapters": {"values": world.cabinet_adapter_ids},
                # Another owner's adapter: a route from it is granted.
                "logins": {"values": [ADAPTER]},
                "doomed": {"values": world.doomed_adapter_ids},
                "messages": {"values": world.message_ids},
                "topics": {"values": world.topic_ids},
                "doomed_topics": {"values": world.doomed_topic_ids},
            },
            "parameters": {
                "path.adapter_id": real("adapters"),
                "path.sender_id": real("adapters"),
                "body.senderAdapterId": real("adapters"),
                "body.senderLogin": real("logins"),
                "path.message_id": real("messages"),
                "path.topic_id": real("topics"),
                "body.adapterId": real("adapters"),
            },
            "operations": [
                {
                    "include-method": "DELETE",
                    "include-path": "/api/users/adapters/{adapter_id}",
                    "parameters": {"path.adapter_id": real("doomed")},
                },
                {
                    "include-method": "DELETE",
                    "include-path": "/api/users/topics/{topic_id}",
                    "parameters": {"path.topic_id": real("doomed_topics")},
                },
            ],
        }
    )


# X-Device-ID as the schema states it: any other value is the fuzzer's negative case.
VALID_DEVICE_ID = re.compile(r"[\x20-\x7e]{1,128}")


def bearer_auth(principal: Principal, base_url: str) -> type:
    """An auth provider signing ``principal`` in. Its session is bound to DEVICE, so a request
    carries that one in place of a valid X-Device-ID the fuzzer made up (which would only be 401
    DEVICE_MISMATCH, for every case); an invalid one stays, to be refused with 400."""

    class BearerAuth:
        def get(self, case: schemathesis.Case[Any], context: schemathesis.AuthContext) -> str:
            return principal.sign_in(base_url)

        def set(
            self, case: schemathesis.Case[Any], data: str, context: schemathesis.AuthContext
        ) -> None:
            case.headers["Authorization"] = f"Bearer {data}"
            device = case.headers.get("X-Device-ID")
            if device is None or VALID_DEVICE_ID.fullmatch(str(device)):
                case.headers["X-Device-ID"] = DEVICE

    BearerAuth.__name__ = f"BearerAuth({principal.identifier})"
    return BearerAuth


def is_the_contract_kept(
    context: schemathesis.HookContext,
    failure: Any,
    case: schemathesis.Case[Any],
    response: schemathesis.Response,
) -> bool:
    """filter_failure: keep every failure but a 400 to valid data that the contract prescribes."""
    if not isinstance(failure, RejectedPositiveData) or response.status_code != 400:
        return True
    try:
        problem = json.loads(response.content)
    except ValueError:
        return True
    if not isinstance(problem, dict):
        return True
    if problem.get("code") in CONTRACT_REJECTIONS:
        return False
    messages = [message for field in (problem.get("errors") or {}).values() for message in field]
    return problem.get("code") != "VALIDATION_FAILED" or not all(
        message in UNSTATABLE_RULES or message.startswith(UNSTATABLE_PREFIXES)
        for message in messages
    )


def run_as_the_contract_says(schema: OpenApiSchema, base_url: str) -> OpenApiSchema:
    """``schema`` with each operation's principal signed in and is_the_contract_kept judging."""
    # The first provider whose filter matches signs a request in; /api/auth/* match none.
    # retry_on=[]: a 401 is never retried with a new token, so a session that dies mid-run shows.
    schema.auth(refresh_interval=None, retry_on=[]).apply_to(
        method="DELETE", path="/api/users/sessions/{session_id}"
    )(bearer_auth(SESSION_ENDER_PRINCIPAL, base_url))
    schema.auth(refresh_interval=600, retry_on=[]).apply_to(path_regex="^/api/users/")(
        bearer_auth(CABINET_PRINCIPAL, base_url)
    )
    schema.auth(refresh_interval=600, retry_on=[]).apply_to(path_regex="^/api/exchange/")(
        bearer_auth(ADAPTER_PRINCIPAL, base_url)
    )
    schema.hook("filter_failure")(is_the_contract_kept)
    return schema


STREAM = "/api/exchange/messages/stream"


def ask_for_the_stream(case: schemathesis.Case[Any]) -> None:
    """The push stream answers only a request that asks for text/event-stream by name (another
    Accept is 406, which tests/exchange/test_stream.py covers), and JSON Schema has no say over
    Accept: every case of it asks so."""
    if case.operation.path == STREAM:
        case.headers["Accept"] = "text/event-stream"


@pytest.fixture(scope="module")
def live_schema(live_platform: Gunicorn, stack_database: StackDatabase) -> OpenApiSchema:
    world = create_world(stack_database)
    schema = schemathesis.openapi.from_url(
        f"{live_platform.base_url}/api/schema/", config=fuzzer_config(world)
    )
    return run_as_the_contract_says(schema, live_platform.base_url)


@pytest.fixture(autouse=True)
def quiet_sign_ins(caplog: pytest.LogCaptureFixture) -> None:
    """A failure's captured log without a line for every sign-in of the auth providers."""
    caplog.set_level(logging.WARNING, logger="httpx")


def repeat_the_new_password(case: schemathesis.Case[Any]) -> None:
    """A valid body repeats its new password in confirmPassword (docs/users-api.md, section 1), a rule
    between two fields that JSON Schema cannot state."""
    body = case.body
    if case.meta is None or not case.meta.generation.mode.is_positive:
        return
    if isinstance(body, dict) and "confirmPassword" in body:
        new_password = body.get("password", body.get("newPassword"))
        if new_password is not None:
            body["confirmPassword"] = new_password


def problem_code_conformance(
    ctx: schemathesis.CheckContext, response: schemathesis.Response, case: schemathesis.Case[Any]
) -> None:
    """A problem+json answer's code, and its members, are declared for its status: the
    operation's response names them (tests/problem_answers.py). An undeclared status is
    status_code_conformance's to report."""
    operation = case.operation.definition.raw
    content_type = response.headers.get("content-type", [""])[0]
    if not content_type.startswith(PROBLEM_CONTENT_TYPE):
        return
    if str(response.status_code) not in operation.get("responses", {}):
        return
    problem = json.loads(response.content)
    reason = undeclared_answer(
        operation, response.status_code, str(problem.get("code")), set(problem) - PROBLEM_MEMBERS
    )
    if reason is not None:
        raise AssertionError(f"Undeclared problem: {reason}")


# The batch send and the batch publish: a result per message, each failed on its own.
BATCHES = {"/api/exchange/messages/batch", "/api/exchange/topics/{topic_id}/messages/batch"}


def _component(raw_schema: dict[str, Any], reference: dict[str, Any]) -> dict[str, Any]:
    component: dict[str, Any] = raw_schema["components"]["schemas"][
        reference["$ref"].split("/")[-1]
    ]
    return component


def batch_messages_rejected_alone(
    ctx: schemathesis.CheckContext, response: schemathesis.Response, case: schemathesis.Case[Any]
) -> None:
    """negative_data_rejection for the batch send and publish, which answer 200 with a result per message
    and fails a message that breaks the schema alone (docs/adapters.md, "Send in batches"): a
    case whose body breaks the schema and is answered 200 must break it only in messages, each of
    them failed with a 4xx (a batch that breaks the schema elsewhere is one 400)."""
    meta, body = case.meta, cast(Any, case.body)
    if meta is None or not meta.generation.mode.is_negative or response.status_code != 200:
        return
    raw_schema = case.operation.schema.raw_schema
    content = case.operation.definition.raw["requestBody"]["content"]["application/json"]
    batch = _component(raw_schema, content["schema"])
    messages = batch["properties"]["messages"]
    item = _component(raw_schema, messages["items"])
    whole = {
        **batch,
        "properties": {**batch["properties"], "messages": {**messages, "items": item}},
    }
    if jsonschema.Draft4Validator(whole).is_valid(body):
        return  # the case broke something else (a header): negative_data_rejection's exemption
    validator = jsonschema.Draft4Validator(item)
    results = json.loads(response.content)["results"]
    broken = [
        (message, result)
        for message, result in zip(body["messages"], results, strict=True)
        if not validator.is_valid(message)
    ]
    assert broken, "a batch that breaks the schema, but in none of its messages, was accepted"
    for message, result in broken:
        assert result["status"] == "failed", (message, result)
        assert 400 <= result["error"]["status"] < 500, (message, result)


schema = schemathesis.pytest.from_fixture("live_schema")


# Cases sent, by operation: the test after the fuzzing checks that none was left out.
SENT: Counter[str] = Counter()


@schema.parametrize()
def test_every_operation_answers_as_its_schema_and_the_contract_say(
    case: schemathesis.Case[Any],
) -> None:
    repeat_the_new_password(case)
    ask_for_the_stream(case)
    SENT[f"{case.operation.method.upper()} {case.operation.path}"] += 1
    if case.operation.path in BATCHES:
        case.call_and_validate(
            additional_checks=[problem_code_conformance, batch_messages_rejected_alone],
            excluded_checks=[negative_data_rejection],
        )
    else:
        case.call_and_validate(additional_checks=[problem_code_conformance])


def test_every_operation_of_the_schema_was_fuzzed(live_schema: OpenApiSchema) -> None:
    operations, inputless = set(), set()
    for result in live_schema.get_all_operations():
        assert isinstance(result, Ok), result  # the schema itself is valid
        operation = f"{result.ok().method.upper()} {result.ok().path}"
        operations.add(operation)
        raw = result.ok().definition.raw
        if not raw.get("parameters") and "requestBody" not in raw:
            inputless.add(operation)  # nothing to vary: its few cases are all there are

    assert set(SENT) == operations, "run the whole module: the fuzzing comes first"
    assert min(count for op, count in SENT.items() if op not in inputless) >= FUZZ_EXAMPLES
    assert all(SENT[operation] >= 1 for operation in inputless)
    # What the closing summary of a run shows with -rA.
    print(  # noqa: T201
        f"schemathesis: {len(operations)} operations, {sum(SENT.values())} cases, seed {SEED}"
    )
