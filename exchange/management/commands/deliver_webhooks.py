"""``manage.py deliver_webhooks``: the webhook deliverer as a process of its own (compose's and
Kubernetes' ``webhooks`` service, beside servers run with EXCHANGE_WEBHOOK_DELIVERY_SEPARATE=true).
SIGTERM or SIGINT stops it: it claims no more, lets the posts under way finish within
EXCHANGE_WEBHOOK_TIMEOUT_SECONDS and settles them."""

from __future__ import annotations

import asyncio
import signal
from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from prometheus_client import start_http_server

from exchange.wakeups import wakeups
from exchange.webhooks.delivery import Deliverer


class Command(BaseCommand):
    help = "Push the messages of adapters with an enabled webhook to their endpoints."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--metrics-port",
            type=int,
            default=0,
            help="Serve its Prometheus metrics on this port (/metrics); 0: none.",
        )

    def handle(self, *args: Any, metrics_port: int, **options: Any) -> None:
        if metrics_port:
            start_http_server(metrics_port)
        asyncio.run(self.deliver())

    async def deliver(self) -> None:
        stopping = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stopping.set)
        wakeups.start()
        self.stdout.write("Delivering webhooks.")
        await Deliverer().run(stopping)
