"""What /bus shows of topics: the new topic's form, a card per topic the person may see (their
own, and other owners' open to one of their adapters), its forms, and the sentences for what the
topic services refuse. The pages that change them are exchange/web/topics.py."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from django import forms
from django.utils.functional import Promise
from django.utils.translation import gettext_lazy as _

from accounts.models import User
from accounts.web.sentences import ADAPTER_ACTIONS
from exchange.api.topics import MAX_TYPES
from exchange.models import Subscription, Topic
from exchange.services.topics import TopicView, topics_described, topics_visible

TOPIC_NAME_LENGTH = Topic._meta.get_field("name").max_length or 100
TYPE_LENGTH = 128
ADAPTER_ID_MAX = 2**63 - 1  # a bigint: a larger number names no adapter, and is no query

# The codes each topic form meets once the topic is found (TopicNotFound is the page's 404).
TOPIC_CREATE: Final[Mapping[str, Promise]] = {
    **ADAPTER_ACTIONS,
    "TOPIC_NAME_TAKEN": _("You have a topic with this name already."),
}
TOPIC_OWNER_ONLY: Final[Mapping[str, Promise]] = {
    **ADAPTER_ACTIONS,
    "PERMISSION_DENIED": _("Only the topic's owner may do this."),
}
# Granting publishing or allowing a subscriber: the number names another owner's adapter.
TOPIC_GRANT: Final[Mapping[str, Promise]] = {
    **TOPIC_OWNER_ONLY,
    "NOT_FOUND": _("There is no adapter with this number."),
    "VALIDATION_FAILED": _(
        "Your own adapters need no grant: they may publish to your topics and subscribe to them "
        "already."
    ),
}
PUBLISHER_REVOKE: Final[Mapping[str, Promise]] = {
    **TOPIC_OWNER_ONLY,
    "NOT_FOUND": _("This adapter has no grant to publish to this topic."),
}
SUBSCRIBER_DISALLOW: Final[Mapping[str, Promise]] = {
    **TOPIC_OWNER_ONLY,
    "NOT_FOUND": _("This adapter is not allowed to subscribe to this topic."),
}
SUBSCRIPTION_PUT: Final[Mapping[str, Promise]] = {
    **ADAPTER_ACTIONS,
    "SUBSCRIBE_NOT_ALLOWED": _("The topic's owner has not allowed this adapter to subscribe."),
}
SUBSCRIPTION_DELETE: Final[Mapping[str, Promise]] = {
    **ADAPTER_ACTIONS,
    "NOT_FOUND": _("This adapter has no subscription to this topic."),
}


class TopicCreateForm(forms.Form):
    name = forms.CharField(
        label=_("Name"),
        max_length=TOPIC_NAME_LENGTH,
        help_text=_("Unique among your topics, at most 100 characters."),
        widget=forms.TextInput(attrs={"autocomplete": "off"}),
    )


def topic_create_form(data: Mapping[str, Any] | None = None) -> TopicCreateForm:
    return TopicCreateForm(data, auto_id="id_topic_%s")


class TopicAdapterForm(forms.Form):
    """Another owner's adapter, by its number: granted publishing, or allowed to subscribe."""

    adapter = forms.IntegerField(
        min_value=1,
        max_value=ADAPTER_ID_MAX,
        error_messages={
            "required": _("Enter the number of another owner's adapter."),
            "invalid": _("Enter the number of another owner's adapter."),
            "min_value": _("There is no adapter with this number."),
            "max_value": _("There is no adapter with this number."),
        },
        widget=forms.TextInput(attrs={"inputmode": "numeric", "autocomplete": "off"}),
    )


class SubscriptionForm(forms.Form):
    """One of the person's adapters, chosen in a list (the service decides whether it may
    subscribe), and the message types it takes."""

    adapter = forms.IntegerField(
        label=_("Adapter"),
        min_value=1,
        max_value=ADAPTER_ID_MAX,
        error_messages={
            "required": _("Choose one of your adapters."),
            "invalid": _("Choose one of your adapters."),
            "min_value": _("You have no adapter with this id."),
            "max_value": _("You have no adapter with this id."),
        },
        widget=forms.Select,
    )
    types = forms.CharField(
        label=_("Message types (optional)"),
        required=False,
        max_length=MAX_TYPES * (TYPE_LENGTH + 2),
        help_text=_(
            "Separated by commas or spaces. Empty: every type. Subscribing a subscribed adapter "
            "again changes its types."
        ),
        widget=forms.TextInput(
            attrs={
                "autocomplete": "off",
                "autocapitalize": "none",
                "spellcheck": "false",
                "placeholder": "order.created, order.paid",
            }
        ),
    )

    def clean_types(self) -> list[str] | None:
        """The types typed, in a list; None (every type) when none is."""
        types = [name for name in re.split(r"[,\s]+", self.cleaned_data["types"]) if name]
        if not types:
            return None
        if len(types) > MAX_TYPES:
            raise forms.ValidationError(
                _("Enter at most %(count)s message types."), params={"count": MAX_TYPES}
            )
        if any(len(name) > TYPE_LENGTH for name in types):
            raise forms.ValidationError(
                _("A message type is at most %(count)s characters long."),
                params={"count": TYPE_LENGTH},
            )
        return types


# A topic card's forms, by the name its URL gives them (exchange/web/urls.py).
CARD_FORMS: Final[Mapping[str, type[forms.Form]]] = {
    "publishers": TopicAdapterForm,
    "subscribers": TopicAdapterForm,
    "subscriptions": SubscriptionForm,
}
ADAPTER_LABELS: Final[Mapping[str, Promise]] = {
    "publishers": _("Number of the adapter that may publish"),
    "subscribers": _("Number of the adapter that may subscribe"),
}


def card_form(topic_id: int, name: str, data: Mapping[str, Any] | None = None) -> forms.Form:
    """Form ``name`` of topic ``topic_id``'s card (its ids are the card's own: /bus shows
    many), as sent or empty."""
    form = CARD_FORMS[name](data, auto_id=f"id_topic_{topic_id}_{name}_%s")
    if name in ADAPTER_LABELS:
        form.fields["adapter"].label = str(ADAPTER_LABELS[name])  # forms are made per request
    return form


@dataclass(frozen=True)
class TopicCard:
    """A topic's card: all of it when it is the viewer's own, else their adapters' part."""

    view: TopicView
    forms: dict[str, forms.Form]
    # The viewer's adapters they may subscribe here: all of theirs on their own topic, those
    # the owner allowed on another's.
    subscribable: list[User] = field(default_factory=list)


@dataclass(frozen=True)
class TopicsSection:
    create_form: TopicCreateForm
    cards: list[TopicCard]


@dataclass(frozen=True)
class TopicFormsTyped:
    """Forms a person sent back with errors, shown as typed: the new topic's, or a card's (by
    topic id and form name)."""

    create: TopicCreateForm | None = None
    cards: Mapping[tuple[int, str], forms.Form] = field(default_factory=dict)


def _subscribable(view: TopicView, adapters: Sequence[User]) -> list[User]:
    if view.own:
        return list(adapters)
    allowed = {adapter.pk for adapter in view.subscribers}
    return [adapter for adapter in adapters if adapter.pk in allowed]


def _choice(adapter: User) -> str:
    """An adapter in a list to choose from: its login, its display name, its number."""
    named = (
        f"{adapter.username} {adapter.display_name}" if adapter.display_name else adapter.username
    )
    return f"{named} (#{adapter.pk})"


def topics_section(
    viewer: User, adapters: Iterable[User], typed: TopicFormsTyped | None = None
) -> TopicsSection:
    """The topics ``viewer`` may see, by name, with their cards' forms, in four queries whatever
    their number; ``adapters`` are the viewer's own (/bus has them already)."""
    typed = typed or TopicFormsTyped()
    mine = list(adapters)
    views = topics_described(
        viewer=viewer, topics=list(topics_visible(viewer).order_by("name", "pk"))
    )
    cards = []
    for view in views:
        subscribable = _subscribable(view, mine)
        card_forms: dict[str, forms.Form] = {}
        for name in CARD_FORMS:
            sent = typed.cards.get((view.topic.pk, name))
            card_forms[name] = sent if sent is not None else card_form(view.topic.pk, name)
        choices = [(adapter.pk, _choice(adapter)) for adapter in subscribable]
        adapter_field = card_forms["subscriptions"].fields["adapter"]
        adapter_field.widget.choices = choices
        cards.append(TopicCard(view, card_forms, subscribable))
    create = typed.create if typed.create is not None else topic_create_form()
    return TopicsSection(create, cards)


@dataclass(frozen=True)
class AdapterTopic:
    """A topic on one adapter's page: the adapter's subscription to it, if any, and whether the
    topic's owner (another) granted it publishing or allowed it to subscribe."""

    view: TopicView
    subscription: Subscription | None
    publishing_granted: bool
    subscribing_allowed: bool


def adapter_topics(viewer: User, adapter: User) -> list[AdapterTopic]:
    """The topics where ``adapter`` (``viewer``'s) has a subscription or a grant, by name."""
    views = topics_described(
        viewer=viewer, topics=list(topics_visible(viewer).order_by("name", "pk"))
    )
    shown = []
    for view in views:
        subscription = next((s for s in view.subscriptions if s.adapter_id == adapter.pk), None)
        granted = not view.own and adapter in view.publishers
        allowed = not view.own and adapter in view.subscribers
        if subscription is not None or granted or allowed:
            shown.append(AdapterTopic(view, subscription, granted, allowed))
    return shown
