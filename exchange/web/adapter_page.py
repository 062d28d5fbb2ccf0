"""An adapter's own page in the cabinet (/bus/adapters/{id}): its name, figures, sessions, routes
both ways, webhook, topics, the messages waiting for it and its dead letters; and what only this
page does: naming it, a test message of the person's own, discarding dead letters and deleting
the adapter (the last two ask first, each on a page of its own). Every action is a POST through
the services the JSON API uses; the actions /bus has too (exchange/web/bus.py, routes.py,
webhooks.py) come back here when sent from here (exchange/web/adapter_scope.py)."""

from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.utils.translation import ngettext
from django.views.decorators.http import require_http_methods, require_POST

from accounts.models import User
from accounts.selectors import sessions_live
from accounts.services.adapters import adapter_display_name_set
from accounts.user_agents import user_agent_describe
from accounts.web.flows import cabinet_user
from accounts.web.sentences import error_sentence
from exchange.models import DeadLetter, Route, Subscription, Webhook
from exchange.selectors import (
    adapter_summary,
    dead_letters_recent,
    messages_recent,
    payloads_of,
    route_recipients,
)
from exchange.services.adapters import adapter_remove
from exchange.services.dead_letters import dead_letters_discard
from exchange.services.sending import message_send
from exchange.web.adapter_forms import (
    AdapterNameForm,
    OwnMessageForm,
    own_message_form,
    payload_shown,
)
from exchange.web.adapter_scope import adapter_mine, adapter_path, back_of, message_ids
from exchange.web.bus import RECENT, bus_render
from exchange.web.route_forms import RouteGrantForm, route_form
from exchange.web.shown_once import kept_from_caches, shown_once
from exchange.web.topic_cards import adapter_topics
from exchange.web.traffic import traffic_context
from exchange.web.webhook_cards import WebhookForm, webhook_cards
from platform_site.errors import ApplicationError, PayloadTooLarge, ValidationFailed


def adapter_render(
    request: HttpRequest,
    adapter: User,
    *,
    name_form: AdapterNameForm | None = None,
    message_form: OwnMessageForm | None = None,
    route_typed: RouteGrantForm | None = None,
    webhook_typed: WebhookForm | None = None,
) -> HttpResponse:
    """The adapter's page, with a form sent back with its errors: its name's, the test
    message's, the route's or the webhook URL's."""
    owner = cabinet_user(request)
    waiting = messages_recent(recipient_ids=[adapter.pk], limit=RECENT)
    dead = dead_letters_recent(recipient_ids=[adapter.pk], limit=RECENT)
    payloads = {
        message_id: payload_shown(payload)
        for message_id, payload in payloads_of([*waiting, *dead]).items()
    }
    secrets = shown_once(request)
    typed_hooks = {adapter.pk: webhook_typed} if webhook_typed is not None else None
    context: dict[str, Any] = {
        "adapter": adapter,
        "back": adapter.pk,  # its forms' actions come back here
        "summary": adapter_summary(adapter=adapter),
        "queue_limit": settings.EXCHANGE_MAX_QUEUE_DEPTH,
        "name_form": name_form or AdapterNameForm(initial={"display_name": adapter.display_name}),
        "message_form": message_form or own_message_form(),
        "sessions": [
            {"session": session, "client": user_agent_describe(session.user_agent)}
            for session in sessions_live(user=adapter)
        ],
        "routes_out": route_recipients(sender=adapter),
        "route_form": route_typed or route_form(adapter.pk),
        "hook": webhook_cards([adapter.pk], typed_hooks)[adapter.pk],
        "topics": adapter_topics(owner, adapter),
        "waiting": [(message, payloads[message.message_id]) for message in waiting],
        "dead_letters": [(letter, payloads[letter.message_id]) for letter in dead],
        **traffic_context(request, adapter.pk),
        **secrets,
    }
    return kept_from_caches(render(request, "cabinet/adapter.html", context), secrets)


def page_again(
    request: HttpRequest,
    adapter: User,
    *,
    route_typed: RouteGrantForm | None = None,
    webhook_typed: WebhookForm | None = None,
) -> HttpResponse:
    """The page a form with errors was sent from, again, with the form as typed: the adapter's
    own page, or /bus."""
    if back_of(request) == adapter.pk:
        return adapter_render(
            request, adapter, route_typed=route_typed, webhook_typed=webhook_typed
        )
    return bus_render(
        request,
        route_forms={adapter.pk: route_typed} if route_typed is not None else None,
        webhook_forms={adapter.pk: webhook_typed} if webhook_typed is not None else None,
    )


@login_required(login_url="/login")
def adapter_page(request: HttpRequest, adapter_id: int) -> HttpResponse:
    return adapter_render(request, adapter_mine(request, adapter_id))


@login_required(login_url="/login")
@require_POST
def adapter_name_page(request: HttpRequest, adapter_id: int) -> HttpResponse:
    """A new display name (empty: none); a refused one stays typed, its reason under the field."""
    adapter = adapter_mine(request, adapter_id)
    form = AdapterNameForm(request.POST)
    if form.is_valid():
        try:
            adapter_display_name_set(
                adapter=adapter, display_name=form.cleaned_data["display_name"]
            )
        except ValidationFailed as error:
            for problem in error.extra.get("errors", {}).get("displayName", []):
                form.add_error("display_name", problem)
        else:
            if adapter.display_name:
                done = _("%(login)s is now called %(name)s.")
            else:
                done = _("%(login)s has no display name now.")
            messages.success(
                request, done % {"login": adapter.username, "name": adapter.display_name}
            )
            return redirect(adapter_path(adapter.pk))
    return adapter_render(request, adapter, name_form=form)


@login_required(login_url="/login")
@require_POST
def adapter_message_page(request: HttpRequest, adapter_id: int) -> HttpResponse:
    """A message of the person's own type and payload, sent by the adapter to itself as the
    API sends one; a payload that is no JSON stays typed, with the reason under the field."""
    adapter = adapter_mine(request, adapter_id)
    form = OwnMessageForm(request.POST)
    if form.is_valid():
        try:
            sent = message_send(
                sender=adapter,
                to=adapter.pk,
                type=form.cleaned_data["type"],
                payload=form.cleaned_data["payload"],
                headers={},
                idempotency_key=None,
            )
        except PayloadTooLarge:
            form.add_error(
                "payload",
                _("The payload is larger than the platform takes (%(limit)s bytes of JSON).")
                % {"limit": settings.EXCHANGE_MAX_PAYLOAD_BYTES},
            )
        except ApplicationError as error:
            form.add_error(None, error_sentence(error))
        else:
            messages.success(
                request,
                _("A test message %(id)s is waiting for %(login)s.")
                % {"id": sent.message_id, "login": adapter.username},
            )
            return redirect(adapter_path(adapter.pk))
    return adapter_render(request, adapter, message_form=form)


def _message_ids(request: HttpRequest) -> list[uuid.UUID] | None:
    """The dead letters a discard names (``message``, repeatable); None: it names none, so all
    of them. A value that is no messageId names none of them."""
    values = request.POST.getlist("message") or request.GET.getlist("message")
    return message_ids(values) if values else None


@login_required(login_url="/login")
@require_http_methods(["GET", "POST"])
def dead_letters_discard_page(request: HttpRequest, adapter_id: int) -> HttpResponse:
    """Discarding dead letters cannot be undone: the page asks first, the POST discards one
    (``message``) or all of the adapter's."""
    adapter = adapter_mine(request, adapter_id)
    ids = _message_ids(request)
    if request.method == "POST":
        discarded = dead_letters_discard(
            adapter=adapter, actor=cabinet_user(request), message_ids=ids
        )
        messages.success(
            request,
            ngettext(
                "%(count)s dead letter of %(login)s is discarded.",
                "%(count)s dead letters of %(login)s are discarded.",
                discarded,
            )
            % {"count": discarded, "login": adapter.username},
        )
        return redirect(adapter_path(adapter.pk))
    letters = DeadLetter.objects.filter(recipient=adapter)
    if ids is not None:
        letters = letters.filter(message_id__in=ids)
    return render(
        request,
        "cabinet/dead_letters_discard.html",
        {
            "adapter": adapter,
            "one": letters.first() if ids is not None else None,
            "count": letters.count(),
            "ids": ids,
        },
    )


@login_required(login_url="/login")
@require_http_methods(["GET", "POST"])
def adapter_delete_page(request: HttpRequest, adapter_id: int) -> HttpResponse:
    """Deleting an adapter takes its queue, dead letters, routes, webhook, topic grants,
    subscriptions and sessions with it: the page asks first and says how much goes."""
    adapter = adapter_mine(request, adapter_id)
    if request.method == "POST":
        adapter_remove(adapter=adapter, actor=cabinet_user(request))
        messages.success(request, _("%(login)s is deleted.") % {"login": adapter.username})
        return redirect("/bus")
    summary = adapter_summary(adapter=adapter)
    return render(
        request,
        "cabinet/adapter_delete.html",
        {
            "adapter": adapter,
            "queue": summary.queue,
            "sessions": summary.active_sessions,
            "routes": Route.objects.filter(Q(recipient=adapter) | Q(sender=adapter)).count(),
            "subscriptions": Subscription.objects.filter(adapter=adapter).count(),
            "webhook": Webhook.objects.filter(adapter=adapter).exists(),
        },
    )
