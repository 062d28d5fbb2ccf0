"""/bus, the cabinet's home: the user's adapters with their queues, and what an owner does with
them. Every action is a POST through the services the JSON API uses."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.utils.translation import ngettext
from django.views.decorators.http import require_http_methods, require_POST

from accounts.errors import LoginTaken
from accounts.models import User
from accounts.services.accounts import account_sessions_revoke, account_set_active
from accounts.services.adapters import adapter_create, adapter_for_owner, adapter_password_rotate
from accounts.web.flows import cabinet_user, field_errors
from accounts.web.forms import AdapterCreateForm
from accounts.web.sentences import ROUTE_WITHDRAW, error_sentence
from exchange.selectors import (
    adapters_for_owner,
    dead_letters_recent,
    messages_recent,
    queue_stats,
)
from exchange.services.dead_letters import dead_letters_redrive
from exchange.services.queues import queue_purge
from exchange.services.routes import route_withdraw
from exchange.services.sending import message_send
from exchange.web.adapter_scope import back_of, message_ids, return_to
from exchange.web.route_forms import RouteGrantForm, route_form
from exchange.web.shown_once import credentials_shown_once, kept_from_caches, shown_once
from exchange.web.topic_cards import TopicFormsTyped, topics_section
from exchange.web.traffic import range_links, range_of, traffic_charts
from exchange.web.webhook_cards import WebhookForm, webhook_cards
from platform_site.errors import ApplicationError, ValidationFailed

RECENT = 20


def bus_render(
    request: HttpRequest,
    create_form: AdapterCreateForm | None = None,
    webhook_forms: Mapping[int, WebhookForm] | None = None,
    topic_forms: TopicFormsTyped | None = None,
    route_forms: Mapping[int, RouteGrantForm] | None = None,
) -> HttpResponse:
    """/bus, with a form sent back with its errors: the new adapter's, an adapter's webhook
    URL (``webhook_forms``, by adapter), a topic's (``topic_forms``), or an adapter's route
    (``route_forms``, by adapter)."""
    owner = cabinet_user(request)
    summaries = adapters_for_owner(owner=owner)
    ids = [summary.adapter.pk for summary in summaries]
    webhooks = webhook_cards(ids, webhook_forms)
    secrets = shown_once(request)
    chosen = range_of(request)
    charts = traffic_charts(adapter_ids=ids, range_name=chosen, chart_id="traffic-{}")
    response = render(
        request,
        "cabinet/bus.html",
        {
            "adapters": [
                (
                    summary,
                    webhooks[summary.adapter.pk],
                    (route_forms or {}).get(summary.adapter.pk) or route_form(summary.adapter.pk),
                    charts[summary.adapter.pk],
                )
                for summary in summaries
            ],
            "traffic_ranges": range_links(chosen),
            "create_form": create_form or AdapterCreateForm(),
            **secrets,
            "recent": messages_recent(recipient_ids=ids, limit=RECENT),
            "queue_limit": settings.EXCHANGE_MAX_QUEUE_DEPTH,
            "dead_letters": dead_letters_recent(recipient_ids=ids, limit=RECENT),
            "topics": topics_section(
                owner, [summary.adapter for summary in summaries], topic_forms
            ),
        },
    )
    return kept_from_caches(response, secrets)


@login_required(login_url="/login")
def bus_page(request: HttpRequest) -> HttpResponse:
    return bus_render(request)


@login_required(login_url="/login")
@require_POST
def adapter_create_page(request: HttpRequest) -> HttpResponse:
    """A new adapter, then /bus with its password; a refused login stays on the page, typed as
    it was, with the reason under the field."""
    form = AdapterCreateForm(request.POST)
    if form.is_valid():
        try:
            credentials = adapter_create(
                owner=cabinet_user(request), login=form.cleaned_data["login"] or None
            )
        except ValidationFailed as error:
            field_errors(form, error)
        except LoginTaken:
            form.add_error("login", _("Another account already uses this login."))
        else:
            credentials_shown_once(request, credentials.login, credentials.password)
            return redirect("/bus")
    return bus_render(request, form)


def _sender(request: HttpRequest) -> int | None:
    """The adapter number a route form sent, or None when it is no number."""
    try:
        return int(request.POST.get("sender", ""))
    except ValueError:
        return None


def _adapter_action(request: HttpRequest, adapter_id: int, act: Any) -> HttpResponse:
    owner = cabinet_user(request)
    try:
        adapter = adapter_for_owner(owner=owner, adapter_id=adapter_id)
        act(owner, adapter)
    except ApplicationError as error:
        messages.error(request, error_sentence(error))
    return redirect(return_to(request))


# What a production adapter cannot shrug off: /bus links to a page that asks first (as the
# purge's does), and its button posts.
CONFIRMED_ACTIONS = ("rotate", "disable")


def _rotate(request: HttpRequest, owner: User, adapter: User) -> None:
    password = adapter_password_rotate(adapter=adapter, request=request)
    credentials_shown_once(request, adapter.username, password)


def _disable(request: HttpRequest, owner: User, adapter: User) -> None:
    account_set_active(user=adapter, active=False, actor=owner)
    messages.success(request, _("%(login)s is disabled.") % {"login": adapter.username})


def _enable(request: HttpRequest, owner: User, adapter: User) -> None:
    account_set_active(user=adapter, active=True, actor=owner)
    messages.success(request, _("%(login)s is enabled.") % {"login": adapter.username})


def _revoke(request: HttpRequest, owner: User, adapter: User) -> None:
    ended = account_sessions_revoke(user=adapter, actor=owner, reason="owner")
    messages.success(
        request,
        ngettext(
            "%(count)s session of %(login)s ended.",
            "%(count)s sessions of %(login)s ended.",
            ended,
        )
        % {"count": ended, "login": adapter.username},
    )


def _test_message(request: HttpRequest, owner: User, adapter: User) -> None:
    sent = message_send(
        sender=adapter,
        to=adapter.pk,
        type="cabinet.test",
        payload={"text": "A test message from the cabinet."},
        headers={},
        idempotency_key=None,
    )
    messages.success(
        request,
        _("A test message %(id)s is waiting for %(login)s.")
        % {"id": sent.message_id, "login": adapter.username},
    )


def _withdraw(request: HttpRequest, owner: User, adapter: User) -> None:
    sender_id = _sender(request)
    if sender_id is None:  # a value that is no number names no route either
        messages.error(request, str(ROUTE_WITHDRAW["NOT_FOUND"]))
        return
    try:
        route_withdraw(recipient=adapter, sender_id=sender_id)
    except ApplicationError as error:
        messages.error(request, error_sentence(error, ROUTE_WITHDRAW))
        return
    messages.success(request, _("The route is withdrawn."))


# What an owner may do to one adapter from /bus, each a POST: (request, owner, adapter).
ACTIONS: dict[str, Callable[[HttpRequest, User, User], None]] = {
    "rotate": _rotate,
    "disable": _disable,
    "enable": _enable,
    "revoke": _revoke,
    "test-message": _test_message,
    "withdraw": _withdraw,
}


@login_required(login_url="/login")
@require_http_methods(["GET", "POST"])
def adapter_action_page(request: HttpRequest, adapter_id: int, action: str) -> HttpResponse:
    if request.method == "GET":
        return _adapter_action_confirm(request, adapter_id, action)
    act = ACTIONS.get(action)
    if act is None:
        messages.error(request, _("Unknown action."))
        return redirect(return_to(request))
    return _adapter_action(request, adapter_id, functools.partial(act, request))


def _adapter_action_confirm(request: HttpRequest, adapter_id: int, action: str) -> HttpResponse:
    if action not in CONFIRMED_ACTIONS:
        return HttpResponseNotAllowed(["POST"])
    try:
        adapter = adapter_for_owner(owner=cabinet_user(request), adapter_id=adapter_id)
    except ApplicationError as error:
        messages.error(request, error_sentence(error))
        return redirect("/bus")
    return render(
        request,
        "cabinet/adapter_confirm.html",
        {"adapter": adapter, "action": action, "back": back_of(request)},
    )


@login_required(login_url="/login")
def adapter_purge_page(request: HttpRequest, adapter_id: int) -> HttpResponse:
    """A purge deletes what cannot be brought back: the page asks first, the POST purges."""
    owner = cabinet_user(request)
    try:
        adapter = adapter_for_owner(owner=owner, adapter_id=adapter_id)
    except ApplicationError as error:
        messages.error(request, error_sentence(error))
        return redirect("/bus")
    if request.method == "POST":
        purged = queue_purge(adapter=adapter, actor=owner)
        messages.success(
            request,
            ngettext(
                "%(count)s message waiting for %(login)s is deleted.",
                "%(count)s messages waiting for %(login)s are deleted.",
                purged,
            )
            % {"count": purged, "login": adapter.username},
        )
        return redirect(return_to(request))
    queue = queue_stats(recipient_ids=[adapter.pk])[adapter.pk]
    return render(
        request,
        "cabinet/purge.html",
        {"adapter": adapter, "queue": queue, "back": back_of(request)},
    )


@login_required(login_url="/login")
@require_POST
def redrive_page(request: HttpRequest) -> HttpResponse:
    ids = message_ids(request.POST.getlist("message"))
    revived = dead_letters_redrive(owner=cabinet_user(request), message_ids=ids)
    messages.success(
        request,
        ngettext(
            "%(count)s message is back in its queue.",
            "%(count)s messages are back in their queues.",
            len(revived),
        )
        % {"count": len(revived)},
    )
    return redirect(return_to(request))
