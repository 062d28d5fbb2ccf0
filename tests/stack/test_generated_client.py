"""A client generated from the live /api/schema/ with openapi-python-client, the way docs/adapters.md
tells an adapter developer to generate one, exchanges a message through real gunicorn: one adapter
signs in and sends, another of the same owner receives and acknowledges, each passing its own
X-Device-ID on every call; and the guide's own example of such a client runs as printed.

The generator runs with the guide's command line plus --fail-on-warning, so a part of the schema
it cannot turn into code (a construct it does not support, a response it cannot parse) fails here
rather than leaving a hole in somebody's client. The package is generated into the test's temporary folder and imported from
there; nothing is written into the checkout.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.exchange.test_adapters_guide import runnable
from tests.stack.conftest import Gunicorn, StackDatabase

pytestmark = pytest.mark.stack

# The generator's command and ruff, which it formats the generated code with, installed by the
# dev extras beside this interpreter.
VENV_BIN = Path(sys.executable).parent
PACKAGE = "exchange_platform_api"
SENDER_DEVICE = "erp-sender-1"
RECIPIENT_DEVICE = "erp-recipient-1"
# A sender and a recipient for the test's own exchange, and one for the guide's example.
ADAPTER_LOGINS = ("erp-sender", "erp-recipient", "guide-reader")


@dataclass(frozen=True)
class Adapter:
    adapter_id: int
    login: str
    password: str


@pytest.fixture(scope="module")
def adapters(stack_database: StackDatabase) -> dict[str, Adapter]:
    """Adapters of one owner, who may therefore send to each other (docs/adapters.md, section 5)."""
    created = json.loads(
        stack_database.shell(
            "import json\n"
            "from accounts.models import User\n"
            "from accounts.services.adapters import adapter_create\n"
            "owner = User.objects.create_user(\n"
            "    username='generated-client-owner', email='generated@example.com',\n"
            "    email_confirmed=True,\n"
            ")\n"
            "created = [adapter_create(owner=owner, login=login) for login in "
            f"{ADAPTER_LOGINS!r}]\n"
            "print(json.dumps([[c.adapter_id, c.login, c.password] for c in created]))\n"
        )
    )
    return {login: Adapter(adapter_id, login, password) for adapter_id, login, password in created}


@pytest.fixture(scope="module")
def generated(gunicorn: Gunicorn, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """``generated("api.auth.login_username")``: a module of the client generated from the live
    schema, imported from a temporary folder (and forgotten again after the module's tests)."""
    folder = tmp_path_factory.mktemp("generated-client")
    result = subprocess.run(
        [
            VENV_BIN / "openapi-python-client",
            "generate",
            "--url",
            f"{gunicorn.base_url}/api/schema/",
            "--output-path",
            folder / PACKAGE,
            "--meta",
            "none",
            "--fail-on-warning",
        ],
        cwd=folder,
        env={**os.environ, "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    sys.path.insert(0, str(folder))
    try:
        yield lambda module: importlib.import_module(f"{PACKAGE}.{module}")
    finally:
        sys.path.remove(str(folder))
        for name in [name for name in sys.modules if name.partition(".")[0] == PACKAGE]:
            del sys.modules[name]


def test_a_client_generated_from_the_live_schema_sends_receives_and_acks_messages(
    gunicorn: Gunicorn, generated: Any, adapters: dict[str, Adapter]
) -> None:
    sender, recipient = adapters["erp-sender"], adapters["erp-recipient"]
    client, models = generated("client"), generated("models")
    login_username = generated("api.auth.login_username")
    exchange_send = generated("api.exchange.exchange_send")
    exchange_receive = generated("api.exchange.exchange_receive")
    exchange_ack = generated("api.exchange.exchange_ack")
    exchange_whoami = generated("api.exchange.exchange_whoami")
    anonymous = client.Client(base_url=gunicorn.base_url, raise_on_unexpected_status=True)

    def sign_in(adapter: Adapter, device_id: str) -> Any:
        signed_in = login_username.sync(
            client=anonymous,
            body=models.LoginUsernameInputRequest(
                username=adapter.login, password=adapter.password
            ),
            x_device_id=device_id,
        )
        assert isinstance(signed_in, models.LoginSuccessOutput), signed_in
        assert signed_in.user_dto.roles == ["ADAPTER"]
        return client.AuthenticatedClient(
            base_url=gunicorn.base_url,
            token=signed_in.access_token,
            raise_on_unexpected_status=True,
            timeout=30,
        )

    as_sender = sign_in(sender, SENDER_DEVICE)
    order = models.SendInputRequest(
        to=recipient.adapter_id,
        type_="order.created",
        payload=models.SendInputRequestPayloadType0.from_dict({"orderId": 1001}),
    )
    sent = exchange_send.sync(
        client=as_sender, body=order, idempotency_key="order-1001", x_device_id=SENDER_DEVICE
    )
    replayed = exchange_send.sync(
        client=as_sender, body=order, idempotency_key="order-1001", x_device_id=SENDER_DEVICE
    )
    assert isinstance(sent, models.SentOutput), sent
    assert isinstance(sent.message_id, uuid.UUID)
    assert isinstance(replayed, models.SentOutput), replayed
    assert (replayed.message_id, replayed.duplicate) == (sent.message_id, True)

    as_recipient = sign_in(recipient, RECIPIENT_DEVICE)
    received = exchange_receive.sync(
        client=as_recipient, max_=10, wait_seconds=5, x_device_id=RECIPIENT_DEVICE
    )
    assert isinstance(received, models.ReceiveOutput), received
    [message] = received.messages
    assert message.message_id == sent.message_id
    assert (message.sender, message.type_, message.payload) == (
        sender.adapter_id,
        "order.created",
        {"orderId": 1001},
    )

    # The ACK that also receives (docs/exchange.md) brings the next message beside its results.
    following = exchange_send.sync(
        client=as_sender, body=order, idempotency_key="order-1002", x_device_id=SENDER_DEVICE
    )
    assert isinstance(following, models.SentOutput), following
    acked = exchange_ack.sync(
        client=as_recipient,
        body=models.AckInputRequest(
            message_ids=[message.message_id], receive=models.ReceiveOptionsRequest(max_=10)
        ),
        x_device_id=RECIPIENT_DEVICE,
    )
    assert isinstance(acked, models.AckOutput), acked
    assert [(result.message_id, result.status) for result in acked.results] == [
        (sent.message_id, "acked")
    ]
    assert [received.message_id for received in acked.messages] == [following.message_id]

    acked = exchange_ack.sync(
        client=as_recipient,
        body=models.AckInputRequest(message_ids=[following.message_id]),
        x_device_id=RECIPIENT_DEVICE,
    )
    assert isinstance(acked, models.AckOutput), acked
    assert [(result.message_id, result.status) for result in acked.results] == [
        (following.message_id, "acked")
    ]
    assert "messages" not in acked.to_dict()  # asked for no receive

    # The device id is per call: a call that leaves it out comes from another device.
    refused = exchange_whoami.sync(client=as_recipient)
    assert isinstance(refused, models.ProblemOutput), refused
    assert (refused.status, refused.code) == (401, "DEVICE_MISMATCH")


def test_the_generated_client_example_of_the_adapters_guide_works_as_printed(
    gunicorn: Gunicorn, generated: Any, adapters: dict[str, Adapter]
) -> None:
    example = runnable("generated-client", "python")
    reader = adapters["guide-reader"]
    package_folder = Path(generated("client").__file__).parents[1]

    result = subprocess.run(
        [sys.executable, "-c", example],
        env={
            "PATH": os.environ["PATH"],
            "PYTHONPATH": str(package_folder),
            "BASE": gunicorn.base_url,
            "LOGIN": reader.login,
            "PASSWORD": reader.password,
        },
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert result.returncode == 0, result.stderr
    printed = [line.removeprefix("# ") for line in example.splitlines() if line.startswith("# ")]
    assert result.stdout.splitlines() == printed
