"""The batch endpoints' loop, shared by ``send_batch`` and ``publish_batch``: 100 messages per
request, each message's outcome or its error, and what a 429 refused sent again, with the same
idempotency keys, under the client's retry policy."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

import httpx

from exchange_client.errors import ExchangeError, error_from_problem
from exchange_client.retries import Deadline, RetryPolicy

logger = logging.getLogger("exchange_client")
Outcome = TypeVar("Outcome")

# Messages per batch send or publish.
MAX_BATCH = 100


def batches_post(
    call: Callable[..., httpx.Response],
    retry: RetryPolicy,
    path: str,
    bodies: list[dict[str, Any]],
    outcome: Callable[[dict[str, Any]], Outcome],
    what: str,
) -> list[Outcome | ExchangeError]:
    """Post ``bodies`` to the batch endpoint ``path`` with ``call`` (the client's, which signs
    in and retries whole requests), 100 per request, sending again what a 429 refused under
    ``retry``: each body's ``outcome`` of its result, or its error, in order."""
    outcomes: dict[int, Outcome | ExchangeError] = {}
    for start in range(0, len(bodies), MAX_BATCH):
        positions = list(range(start, min(start + MAX_BATCH, len(bodies))))
        deadline = Deadline(retry.give_up_after)
        attempt = 0
        while positions:
            attempt += 1
            answer = call(
                "POST", path, json={"messages": [bodies[position] for position in positions]}
            ).json()
            again: list[int] = []
            retry_after = 0.0
            for position, result in zip(positions, answer["results"], strict=True):
                error = result.get("error")
                if error is not None and error["status"] == 429:
                    again.append(position)
                    retry_after = max(retry_after, error.get("retryAfterSeconds", 0))
                if error is not None:
                    outcomes[position] = error_from_problem(error["status"], error)
                else:
                    outcomes[position] = outcome(result)
            wait = retry.wait(attempt, retry_after)
            if not again or not deadline.allows(wait):
                break
            logger.warning(
                "%s: %d of %d refused for now; retrying them in %.1f s",
                what,
                len(again),
                len(positions),
                wait,
            )
            time.sleep(wait)
            positions = again
    return [outcomes[position] for position in range(len(bodies))]
