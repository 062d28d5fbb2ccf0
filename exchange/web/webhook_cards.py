"""What /bus shows of each adapter's webhook: its URL form, its state, its recent delivery log, and
the sentences for what the webhook services refuse. The pages that change it are
exchange/web/webhooks.py."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from django import forms
from django.db.models import F, Window
from django.db.models.functions import RowNumber
from django.utils.functional import Promise
from django.utils.translation import gettext_lazy as _

from accounts.web.sentences import ADAPTER_ACTIONS
from exchange.models import Webhook, WebhookAttempt
from exchange.webhooks.targets import MAX_URL_LENGTH

LOG_SHOWN = 20
SHOWN_ONCE = "webhook_secret"  # a new secret, shown on the next page view only (as CREDENTIALS_KEY)

# The codes a webhook action meets once adapter_for_owner has found the adapter.
WEBHOOK_ACTIONS: Final[Mapping[str, Promise]] = {
    **ADAPTER_ACTIONS,
    "NOT_FOUND": _("This adapter has no webhook."),
    "WEBHOOK_DISABLED": _("The webhook is turned off: turn it on to send it a test event."),
}

# What exchange.webhooks.targets.url_problem says of a URL (in English, for the API), as a page
# says it; a problem missing here is shown as the service wrote it.
URL_PROBLEMS: Final[Mapping[str, Promise]] = {
    f"Ensure this field has no more than {MAX_URL_LENGTH} characters.": _(
        "Enter a URL of at most %(count)s characters."
    ),
    "Write the URL in ASCII: a name in punycode (xn--...), the path percent-encoded.": _(
        "Write the URL in ASCII: a name in punycode (xn--…), the path percent-encoded."
    ),
    "Enter a valid URL.": _("Enter a valid URL."),
    "Enter a valid host name.": _("Enter a valid host name."),
    "Enter an https:// URL.": _("Enter a URL that begins with https://."),
    "Credentials in the URL are not accepted: authenticate by the signature.": _(
        "Leave the user name and password out of the URL: the endpoint checks each request's "
        "signature instead."
    ),
    "The address is private, loopback, link-local or multicast.": _(
        "This address is private, loopback, link-local or multicast: a webhook reaches only "
        "public addresses."
    ),
}


def url_problem_sentence(problem: str) -> str:
    sentence = URL_PROBLEMS.get(str(problem))
    return str(problem) if sentence is None else str(sentence) % {"count": MAX_URL_LENGTH}


class WebhookForm(forms.Form):
    url = forms.CharField(
        label=_("Webhook URL"),
        max_length=MAX_URL_LENGTH,
        help_text=_("An https:// address: the adapter's messages are POSTed there, signed."),
        widget=forms.TextInput(
            attrs={
                "inputmode": "url",
                "autocomplete": "off",
                "autocapitalize": "none",
                "spellcheck": "false",
                "placeholder": "https://",
            }
        ),
    )


def webhook_form(
    adapter_id: int, data: Mapping[str, Any] | None = None, *, url: str | None = None
) -> WebhookForm:
    """The URL form of one adapter's card (its ids are the card's own: /bus shows many), as
    sent, or showing the webhook's ``url``."""
    return WebhookForm(
        data, auto_id=f"id_webhook_{adapter_id}_%s", initial={"url": url} if url else None
    )


@dataclass(frozen=True)
class WebhookCard:
    """The webhook section of an adapter's card."""

    webhook: Webhook | None
    form: WebhookForm
    attempts: list[WebhookAttempt] = field(default_factory=list)

    @property
    def state(self) -> str:
        """``on``; ``off`` (turned off by its owner); or why the platform turned it off."""
        if self.webhook is None:
            return ""
        if self.webhook.enabled:
            return "on"
        return self.webhook.disabled_reason or "off"


def webhook_cards(
    adapter_ids: Iterable[int], forms_typed: Mapping[int, WebhookForm] | None = None
) -> dict[int, WebhookCard]:
    """Each adapter's webhook section, in two queries whatever the number of adapters: the
    webhooks, and the last LOG_SHOWN attempts of each. ``forms_typed`` are forms a person sent
    back with errors, shown as typed."""
    ids = list(adapter_ids)
    webhooks = {
        webhook.adapter_id: webhook for webhook in Webhook.objects.filter(adapter_id__in=ids)
    }
    logs: dict[int, list[WebhookAttempt]] = {}
    if webhooks:
        ranked = (
            WebhookAttempt.objects.filter(adapter_id__in=list(webhooks))
            .annotate(
                rank=Window(
                    RowNumber(),
                    partition_by=F("adapter_id"),
                    order_by=[F("at").desc(), F("id").desc()],
                )
            )
            .filter(rank__lte=LOG_SHOWN)
            .order_by("adapter_id", "-at", "-id")
        )
        for attempt in ranked:
            logs.setdefault(attempt.adapter_id, []).append(attempt)
    typed = forms_typed or {}
    cards = {}
    for adapter_id in ids:
        webhook = webhooks.get(adapter_id)
        form = typed.get(adapter_id) or webhook_form(
            adapter_id, url=webhook.url if webhook else None
        )
        cards[adapter_id] = WebhookCard(webhook, form, logs.get(adapter_id, []))
    return cards
