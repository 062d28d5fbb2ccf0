"""What a cabinet page says for a service's error: one sentence per code, in the page's language.

An error's ``detail`` is the API's English, written for developers; a page looks the error's code
up here instead. A form whose codes mean something narrower than the cabinet's (a route's
NOT_FOUND names a sender, not one of the owner's adapters) has a table of its own. A sentence
keeps the numbers its error carries: ``%(seconds)s`` is ``retryAfterSeconds``, ``%(code)s`` the
code itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from django.utils.functional import Promise
from django.utils.translation import gettext_lazy as _

from platform_site.errors import ApplicationError

# The codes the /bus pages meet: an adapter action, its confirmation and the purge page.
ADAPTER_ACTIONS: Final[Mapping[str, Promise]] = {
    "NOT_FOUND": _("You have no adapter with this id."),
    "QUEUE_FULL": _(
        "The queue is full. Try again in %(seconds)s seconds, once its adapter has taken "
        "messages off it."
    ),
    "SERVICE_UNAVAILABLE": _(
        "The platform cannot do this for a moment, and nothing was changed. "
        "Try again in a few seconds."
    ),
}

# Granting a route: adapter_for_owner has found the recipient already.
ROUTE_GRANT: Final[Mapping[str, Promise]] = {
    **ADAPTER_ACTIONS,
    "NOT_FOUND": _("There is no adapter with this login."),
    "ROUTE_NOT_NEEDED": _(
        "This is one of your adapters: they may send to each other already. "
        "Enter another owner's adapter."
    ),
}

ROUTE_WITHDRAW: Final[Mapping[str, Promise]] = {
    **ADAPTER_ACTIONS,
    "NOT_FOUND": _("This adapter has no route from that sender."),
}

# An authenticator app's code that passed before (CODE_ALREADY_USED), on every page that takes one.
CODE_ALREADY_USED: Final = _(
    "This code was already used. Wait for the next code your authenticator app shows."
)

# A code no table names yet still reads as a sentence, and says which code it was.
UNKNOWN = _("This cannot be done right now (%(code)s).")


def error_sentence(
    error: ApplicationError, sentences: Mapping[str, Promise] = ADAPTER_ACTIONS
) -> str:
    values = {
        "code": error.code,
        "seconds": error.extra.get("retryAfterSeconds", 60),
    }
    return str(sentences.get(error.code, UNKNOWN)) % values
