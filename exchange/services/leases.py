"""Releasing leased messages (a nack) and extending leases, by the receipt handles a delivery
carries: only while the receipt's lease is still the message's (exchange/queries.py: RELEASE,
EXTEND)."""

from __future__ import annotations

import base64
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from django.db import connection

from accounts.models import User
from exchange import queries

ReleaseStatus = Literal["released", "leaseLost", "notFound"]
ExtendStatus = Literal["extended", "leaseLost", "notFound"]


@dataclass(frozen=True)
class Receipt:
    message_id: uuid.UUID
    lease_token: uuid.UUID


def receipt_handle(message_id: uuid.UUID, lease_token: uuid.UUID) -> str:
    """The receipt handle's format (queries.RECEIVE renders it in SQL): base64url, no padding."""
    return base64.urlsafe_b64encode(message_id.bytes + lease_token.bytes).rstrip(b"=").decode()


_RECEIPT_HANDLE = re.compile(r"[A-Za-z0-9_-]{43}")


def receipt_parse(handle: str) -> Receipt | None:
    """The receipt in ``handle``, or None if it is not one this server issued the shape of
    (base64url of 32 bytes, unpadded: what the API's schema says)."""
    if not _RECEIPT_HANDLE.fullmatch(handle):
        return None
    raw = base64.urlsafe_b64decode(handle + "=")
    return Receipt(message_id=uuid.UUID(bytes=raw[:16]), lease_token=uuid.UUID(bytes=raw[16:]))


LostStatus = Literal["leaseLost", "notFound"]


def _under_receipts(
    *, adapter: User, statement: str, params: dict[str, Any], receipts: Sequence[Receipt]
) -> tuple[dict[uuid.UUID, tuple[Any, ...]], dict[uuid.UUID, LostStatus]]:
    """Run a lease statement (RELEASE, EXTEND) for these receipts.

    Returns the rest of the row of each message it touched, and for every other receipt whether
    the caller still has the message under a newer lease (leaseLost) or not at all (notFound):
    another adapter's message is notFound, like one that never existed.
    """
    with connection.cursor() as cursor:
        cursor.execute(
            statement,
            {
                **params,
                "recipient": adapter.pk,
                "ids": [receipt.message_id for receipt in receipts],
                "tokens": [receipt.lease_token for receipt in receipts],
            },
        )
        # A NULL row is the release's notification (queries.RELEASE).
        touched = {row[0]: tuple(row[1:]) for row in cursor.fetchall() if row[0] is not None}
        others = [receipt.message_id for receipt in receipts if receipt.message_id not in touched]
        held: set[uuid.UUID] = set()
        if others:
            cursor.execute(queries.HELD, {"recipient": adapter.pk, "ids": others})
            held = {row[0] for row in cursor.fetchall()}
    lost: dict[uuid.UUID, LostStatus] = {
        message_id: "leaseLost" if message_id in held else "notFound" for message_id in others
    }
    return touched, lost


def messages_release(
    *, adapter: User, receipts: Sequence[Receipt], delay_seconds: int
) -> list[tuple[uuid.UUID, ReleaseStatus]]:
    """Give leased messages back to the queue now or after ``delay_seconds`` (a nack)."""
    released, lost = _under_receipts(
        adapter=adapter,
        statement=queries.RELEASE,
        params={"delay": delay_seconds},
        receipts=receipts,
    )
    return [
        (
            receipt.message_id,
            "released" if receipt.message_id in released else lost[receipt.message_id],
        )
        for receipt in receipts
    ]


def leases_extend(
    *, adapter: User, receipts: Sequence[Receipt], lease_seconds: int
) -> list[tuple[uuid.UUID, ExtendStatus, datetime | None]]:
    """Extend leases still held under these receipts to ``lease_seconds`` from now."""
    extended, lost = _under_receipts(
        adapter=adapter,
        statement=queries.EXTEND,
        params={"lease": lease_seconds},
        receipts=receipts,
    )
    return [
        (receipt.message_id, "extended", extended[receipt.message_id][0])
        if receipt.message_id in extended
        else (receipt.message_id, lost[receipt.message_id], None)
        for receipt in receipts
    ]
