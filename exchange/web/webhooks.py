"""The webhook section of an adapter's card on /bus: set it up, point it elsewhere, turn it on or
off, rotate its secret, send it a test event, delete it. Every action is a POST through the
services the JSON API uses (exchange/services/webhooks.py); deleting asks first, on a page of its
own. Another owner's adapter, like a missing one, is 404."""

from __future__ import annotations

import functools
from collections.abc import Callable

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseNotAllowed
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods, require_POST

from accounts.models import User
from accounts.web.sentences import error_sentence
from exchange.errors import WebhookNotFound
from exchange.services.webhooks import (
    webhook_delete,
    webhook_get,
    webhook_put,
    webhook_secret_rotate,
    webhook_test_send,
)
from exchange.web.adapter_page import page_again
from exchange.web.adapter_scope import adapter_mine, back_of, return_to
from exchange.web.webhook_cards import (
    SHOWN_ONCE,
    WEBHOOK_ACTIONS,
    url_problem_sentence,
    webhook_form,
)
from platform_site.errors import ApplicationError, ValidationFailed
from platform_site.timestamps import utc_display


def _secret_shown_once(
    request: HttpRequest, adapter: User, secret: str, previous_until: str | None = None
) -> None:
    request.session[SHOWN_ONCE] = {
        "login": adapter.username,
        "secret": secret,
        "previous_until": previous_until,
    }


@login_required(login_url="/login")
@require_POST
def webhook_url_page(request: HttpRequest, adapter_id: int) -> HttpResponse:
    """Set up the adapter's webhook (turned on; its secret is shown once), or point it to another
    URL (on or off as it was). A URL the service refuses is told under the field, still typed."""
    adapter = adapter_mine(request, adapter_id)
    form = webhook_form(adapter.pk, request.POST)
    if form.is_valid():
        url = form.cleaned_data["url"]
        try:
            done = webhook_put(adapter=adapter, url=url)  # on or off as it was; new: on
        except ValidationFailed as error:
            for name, problems in error.extra.get("errors", {}).items():
                for problem in problems:
                    form.add_error("url" if name == "url" else None, url_problem_sentence(problem))
        except ApplicationError as error:
            messages.error(request, error_sentence(error, WEBHOOK_ACTIONS))
            return redirect(return_to(request))
        else:
            if done.secret is not None:
                _secret_shown_once(request, adapter, done.secret)
                messages.success(
                    request,
                    _("The messages of %(login)s are now pushed to %(url)s.")
                    % {"login": adapter.username, "url": url},
                )
            else:
                messages.success(
                    request,
                    _("The webhook of %(login)s now points to %(url)s.")
                    % {"login": adapter.username, "url": url},
                )
            return redirect(return_to(request))
    return page_again(request, adapter, webhook_typed=form)


def _switch(request: HttpRequest, adapter: User, *, enabled: bool) -> None:
    webhook_put(adapter=adapter, enabled=enabled)
    done = (
        _("The webhook of %(login)s is on: its messages are pushed to it.")
        if enabled
        else _(
            "The webhook of %(login)s is off: the adapter receives its messages over the API again."
        )
    )
    messages.success(request, done % {"login": adapter.username})


def _rotate(request: HttpRequest, adapter: User) -> None:
    secret = webhook_secret_rotate(adapter=adapter)
    until = webhook_get(adapter=adapter).previous_secret_until
    _secret_shown_once(request, adapter, secret, utc_display(until) if until else None)


def _test(request: HttpRequest, adapter: User) -> None:
    message = webhook_test_send(adapter=adapter)
    messages.success(
        request,
        _("A test event %(id)s is queued for the webhook of %(login)s.")
        % {"id": message.message_id, "login": adapter.username},
    )


def _delete(request: HttpRequest, adapter: User) -> None:
    webhook_delete(adapter=adapter)
    messages.success(
        request,
        _(
            "The webhook of %(login)s is deleted: the adapter receives its messages over the API "
            "again."
        )
        % {"login": adapter.username},
    )


# What an owner may do to an adapter's webhook from /bus, each a POST: (request, adapter).
ACTIONS: dict[str, Callable[[HttpRequest, User], None]] = {
    "enable": functools.partial(_switch, enabled=True),
    "disable": functools.partial(_switch, enabled=False),
    "rotate": _rotate,
    "test": _test,
    "delete": _delete,
}


@login_required(login_url="/login")
@require_http_methods(["GET", "POST"])
def webhook_action_page(request: HttpRequest, adapter_id: int, action: str) -> HttpResponse:
    act = ACTIONS.get(action)
    if act is None:
        raise Http404
    adapter = adapter_mine(request, adapter_id)
    if request.method == "GET":
        return _delete_confirm(request, adapter, action)
    try:
        act(request, adapter)
    except ApplicationError as error:
        messages.error(request, error_sentence(error, WEBHOOK_ACTIONS))
    return redirect(return_to(request))


def _delete_confirm(request: HttpRequest, adapter: User, action: str) -> HttpResponse:
    """Deleting asks first: the webhook's secret and delivery log go with it."""
    if action != "delete":
        return HttpResponseNotAllowed(["POST"])
    try:
        webhook = webhook_get(adapter=adapter)
    except WebhookNotFound as error:
        messages.error(request, error_sentence(error, WEBHOOK_ACTIONS))
        return redirect(return_to(request))
    return render(
        request,
        "cabinet/webhook_delete.html",
        {"adapter": adapter, "webhook": webhook, "back": back_of(request)},
    )
