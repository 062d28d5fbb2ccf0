"""Which of the person's adapters (and which of their messages) a cabinet page acts on, and where
an action goes back to: the adapter's own page (/bus/adapters/{id}) when its form was sent from
there, else /bus. A form on
the adapter's page carries ``back``, the adapter's number; a link to a page that asks first
carries it in the query, and that page's form passes it on."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable

from django.http import Http404, HttpRequest

from accounts.errors import AdapterNotFound
from accounts.models import User
from accounts.services.adapters import adapter_for_owner
from accounts.web.flows import cabinet_user

BACK = "back"
_NUMBER = re.compile(r"[1-9][0-9]{0,18}")  # an adapter's number (a bigint), nothing else


def adapter_mine(request: HttpRequest, adapter_id: int) -> User:
    """The signed-in person's adapter ``adapter_id``; another owner's, like a missing one, is
    404."""
    try:
        return adapter_for_owner(owner=cabinet_user(request), adapter_id=adapter_id)
    except AdapterNotFound:
        raise Http404 from None


def back_of(request: HttpRequest) -> int | None:
    """The number of the adapter whose page the action was sent from; None: from /bus."""
    value = request.POST.get(BACK) or request.GET.get(BACK) or ""
    return int(value) if _NUMBER.fullmatch(value) else None


def adapter_path(adapter_id: int) -> str:
    return f"/bus/adapters/{adapter_id}"


def return_to(request: HttpRequest) -> str:
    """Where the action's redirect goes: the adapter's page it was sent from, or /bus. (Only an
    adapter's page of this site: the number names no other place, and another owner's is 404.)"""
    back = back_of(request)
    return "/bus" if back is None else adapter_path(back)


def message_ids(values: Iterable[str]) -> list[uuid.UUID]:
    """The messageIds among ``values`` (a form's checked boxes or a link's ``message``); a value
    that is none names no message, and is passed over."""
    ids = []
    for value in values:
        try:
            ids.append(uuid.UUID(value))
        except ValueError:
            continue
    return ids
