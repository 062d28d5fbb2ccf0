"""The exchange benchmark's pure parts: what (g) and (h) send, where RabbitMQ is, the turns."""

from __future__ import annotations

import json
from collections.abc import Callable

from bench.throughput.api import send_body
from bench.throughput.flow import Flow, flows_combined, payload
from bench.throughput.load import Plan, in_rotation
from bench.throughput.machine import CpuShare
from bench.throughput.rabbitmq import DEFAULT_URL, broker_of


def test_a_send_carries_the_payload_bytes_that_rabbitmq_is_sent() -> None:
    sent = payload(1234.5678, 7)

    single = json.loads(send_body(42, [sent]))
    batch = json.loads(send_body(42, [sent, payload(1234.5678, 8)]))

    assert single == {"to": 42, "type": "bench", "payload": json.loads(sent)}
    assert batch["messages"][0] == single
    assert batch["messages"][1]["payload"]["n"] == 8
    assert send_body(42, [sent]).count(sent) == 1


def test_the_payload_is_stamped_with_the_send_time_it_is_given() -> None:
    assert json.loads(payload(98765.4321, 3))["sentAt"] == 98765.4321


def test_rabbitmq_urls_name_the_virtual_host_as_rabbitmq_reads_them() -> None:
    default = broker_of(DEFAULT_URL, "q")
    assert (default.host, default.port, default.userid, default.password) == (
        "127.0.0.1",
        5672,
        "guest",
        "guest",
    )
    assert default.virtual_host == "/"
    assert broker_of("amqp://h/", "q").virtual_host == "/"
    assert broker_of("amqp://h", "q").virtual_host == "/"
    assert broker_of("amqp://u:p%40ss@h:5673/%2Fbench", "q").virtual_host == "/bench"
    assert broker_of("amqp://u:p%40ss@h:5673/bench", "q").password == "p@ss"


def test_runs_take_turns_in_rotation_each_round_reversed() -> None:
    order: list[str] = []

    def run(name: str) -> Callable[[Plan], str]:
        def measure(turn: Plan) -> str:
            order.append(name)
            return f"{name}{turn.duration:g}"

        return measure

    plan = Plan(
        clients=8,
        warmup=3.0,
        duration=12.0,
        longpoll_messages=0,
        longpoll_rate=0.0,
        latency_receives=0,
        small_queue=0,
        large_queue=0,
        batch1_fill=0,
        batch100_fill=0,
    )

    turns = in_rotation([run("a"), run("b"), run("c")], plan, rounds=3)

    assert order == ["a", "b", "c", "c", "b", "a", "a", "b", "c"]
    assert turns == [["a4"] * 3, ["b4"] * 3, ["c4"] * 3]


def test_a_figures_turns_add_up_to_one_figure() -> None:
    def turn(sent: int, client: float, latencies: list[float]) -> Flow:
        return Flow(
            seconds=2.0,
            sent=sent,
            received=sent,
            acked=sent,
            sends=sent,
            held=0,
            receives=sent,
            acks=sent,
            empty=0,
            failed=0,
            client_cpu=client / 50,
            latencies_ms=latencies,
            cpu=CpuShare(client=client, rabbitmq=10.0),
            splits=["4/4"],
        )

    flow = flows_combined([turn(100, 20.0, [1.0]), turn(300, 40.0, [2.0, 3.0])])

    assert (flow.seconds, flow.sent, flow.per_second(flow.acked)) == (4.0, 400, 100.0)
    assert flow.cpu.client == 30.0
    assert flow.cpu.rabbitmq == 10.0
    assert flow.latencies_ms == [1.0, 2.0, 3.0]
    assert flow.splits == ["4/4", "4/4"]
