"""The exchange benchmark's pure parts: what (g) and (h) send, where RabbitMQ is, the turns, and
how the push stream's figures read its events and count."""

from __future__ import annotations

import json
from collections.abc import Callable

from bench.throughput.api import send_body
from bench.throughput.events import Dechunker, Event, EventParser, sent_at
from bench.throughput.flow import Flow, flows_combined, payload
from bench.throughput.load import Plan, in_rotation
from bench.throughput.machine import CpuShare
from bench.throughput.rabbitmq import DEFAULT_URL, broker_of
from bench.throughput.stream_figures import handlers_rows, server_cpu_per_message
from bench.throughput.streams_held import Held


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


# --- The push stream's figures: (i), (j), (k) with streams -----------------------------------------

MESSAGE = (
    b"event: message\nid: 9e4c2470-68aa-4794-80ff-04e504be8163\ndata: "
    b'{"messageId":"9e4c2470-68aa-4794-80ff-04e504be8163","payload":{"sentAt":12.5,"n":0}}\n\n'
)
END = b'event: end\ndata: {"code":"TOKEN_REVOKED","detail":"The session ended."}\n\n'


def chunked(*pieces: bytes) -> bytes:
    """A body as the server sends it with Transfer-Encoding: chunked, its last chunk included."""
    return b"".join(b"%x\r\n%s\r\n" % (len(piece), piece) for piece in pieces) + b"0\r\n\r\n"


def events_of(pieces: list[bytes]) -> tuple[list[Event], bool]:
    dechunker, parser = Dechunker(), EventParser()
    events = [event for piece in pieces for event in parser.feed(dechunker.feed(piece))]
    return events, dechunker.done


def test_a_streams_events_come_out_whole_however_the_bytes_are_cut() -> None:
    # Two messages in one chunk (a claim's deliveries go out together), a keep-alive, the end.
    wire = chunked(MESSAGE + MESSAGE, b": keep-alive\n\n", END)

    whole, done = events_of([wire])
    byte_by_byte, done_too = events_of([wire[n : n + 1] for n in range(len(wire))])

    assert whole == byte_by_byte
    assert done
    assert done_too
    message_id = "9e4c2470-68aa-4794-80ff-04e504be8163"
    assert [(event.event, event.id) for event in whole] == [
        ("message", message_id),
        ("message", message_id),
        ("end", None),
    ]
    assert sent_at(whole[0]) == 12.5
    assert json.loads(whole[2].data)["code"] == "TOKEN_REVOKED"


def test_a_keep_alive_is_no_event_and_a_stream_is_not_done_before_its_last_chunk() -> None:
    events, done = events_of([chunked(b": keep-alive\n\n")[:-5]])

    assert (events, done) == ([], False)


def test_data_lines_join_with_a_line_feed() -> None:
    parser = EventParser()

    assert parser.feed(b"data: a\ndata: b\n") == []
    assert parser.feed(b"\n") == [Event("message", None, "a\nb")]


def test_refused_opens_count_refusals_and_opens_never_answered() -> None:
    held = Held(streams=2000)
    held.opens.update({200: 1990, 503: 4})
    held.failures.update({"open: ConnectionResetError": 2, "ack: IncompleteReadError": 3})
    held.rss_warm_mb, held.rss_open_mb = 300.0, 300.0 + 1960 * 40 / 1024

    assert held.refused == 6
    assert held.rss_per_stream_kb == 40.0


def flow_of(acked: int, cpu: CpuShare) -> Flow:
    return Flow(
        seconds=2.0,
        sent=0,
        received=acked,
        acked=acked,
        sends=0,
        held=0,
        receives=0,
        acks=acked // 50,
        empty=0,
        failed=0,
        client_cpu=0.0,
        latencies_ms=[],
        cpu=cpu,
        splits=[],
    )


def test_one_at_a_time_rows_set_the_apis_acks_and_cpu_against_rabbitmqs() -> None:
    ours = flow_of(10_000, CpuShare(server=40.0, postgres=50.0, postgres_background=5.0, redis=5.0))
    theirs = flow_of(16_000, CpuShare(rabbitmq=80.0))

    rows = handlers_rows(4, ours, theirs)

    assert server_cpu_per_message(ours, rabbit=False) == 200.0
    assert server_cpu_per_message(theirs, rabbit=True) == 100.0
    assert [(row.key, row.figure, row.ratio, row.verdict) for row in rows] == [
        ("(i)mq", "8,000", "baseline", ""),
        ("(i)", "5,000", "0.62 x (i)mq", "PASS"),
        ("(i)mq", "100", "baseline", ""),
        ("(i)", "200", "2.00 x (i)mq", ""),
    ]
