"""When and how long to wait before trying a request again."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass


@dataclass(frozen=True)
class RetryPolicy:
    """Back-off for what passes by itself: no connection, 429 and 503.

    Waits grow from ``initial`` to ``maximum`` seconds, doubling, each drawn at random below its
    bound ("full jitter": many clients that failed together do not come back together), and at
    least the ``Retry-After`` the platform asked for. After ``give_up_after`` seconds of trying,
    the last failure is raised.

    Until the platform has answered a client once, a connection that fails is tried for
    ``first_answer_within`` seconds only: a wrong address fails fast, while a platform that
    restarts under a running client is waited for as long as ``give_up_after``.
    """

    initial: float = 0.1
    maximum: float = 5.0
    give_up_after: float = 60.0
    first_answer_within: float = 20.0

    def wait(self, attempt: int, retry_after: float | None) -> float:
        """Seconds to wait before retry number ``attempt`` (1, 2...)."""
        bound = min(self.maximum, self.initial * 2 ** (attempt - 1))
        jittered = random.uniform(0, bound)  # noqa: S311 (spreading retries, not a secret)
        return max(jittered, retry_after or 0.0)


class Deadline:
    """The time left for one call's retries."""

    def __init__(self, seconds: float) -> None:
        self.ends = time.monotonic() + seconds

    def allows(self, wait: float) -> bool:
        return time.monotonic() + wait < self.ends


NO_RETRIES = RetryPolicy(give_up_after=0.0, first_answer_within=0.0)
