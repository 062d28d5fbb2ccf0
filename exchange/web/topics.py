"""The topics of /bus: create one; on your own, grant other owners' adapters publishing, allow
them to subscribe, and delete it (asked first, on a page of its own); on yours and on another
owner's topic open to your adapters, subscribe your adapters and unsubscribe them. Every action
is a POST through the services the JSON API uses (exchange/services/topics.py). A topic that is
not yours and not open to your adapters is 404, whether or not it exists."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.functional import Promise
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_http_methods, require_POST

from accounts.web.flows import cabinet_user
from accounts.web.sentences import error_sentence
from exchange.errors import TopicNotFound, TopicNotYours
from exchange.models import Topic
from exchange.services.topics import (
    publisher_grant,
    publisher_revoke,
    subscriber_allow,
    subscriber_disallow,
    subscription_delete,
    subscription_put,
    topic_create,
    topic_delete,
    topic_for,
    topic_owned,
    topics_described,
)
from exchange.web.bus import bus_render
from exchange.web.topic_cards import (
    PUBLISHER_REVOKE,
    SUBSCRIBER_DISALLOW,
    SUBSCRIPTION_DELETE,
    SUBSCRIPTION_PUT,
    TOPIC_CREATE,
    TOPIC_GRANT,
    TOPIC_OWNER_ONLY,
    TopicFormsTyped,
    card_form,
    topic_create_form,
)
from platform_site.errors import ApplicationError

BUS = "/bus"


def _visible(request: HttpRequest, topic_id: int) -> Topic:
    try:
        return topic_for(cabinet_user(request), topic_id)
    except TopicNotFound:
        raise Http404 from None


@login_required(login_url="/login")
@require_POST
def topic_create_page(request: HttpRequest) -> HttpResponse:
    """A new topic; a name refused stays on the page, typed as it was, with the reason under
    the field."""
    form = topic_create_form(request.POST)
    if form.is_valid():
        try:
            topic = topic_create(owner=cabinet_user(request), name=form.cleaned_data["name"])
        except ApplicationError as error:
            form.add_error("name", error_sentence(error, TOPIC_CREATE))
        else:
            messages.success(
                request,
                _(
                    "The topic %(name)s is created: your adapters may publish to it and "
                    "subscribe to it."
                )
                % {"name": topic.name},
            )
            return redirect(BUS)
    return bus_render(request, topic_forms=TopicFormsTyped(create=form))


@dataclass(frozen=True)
class Role:
    """Another owner's adapter's part in a topic, which only the topic's owner grants."""

    grant: Callable[..., bool]
    withdraw: Callable[..., None]
    withdraw_sentences: Mapping[str, Promise]
    granted: Promise  # new
    had: Promise  # granted before
    withdrawn: Promise


ROLES: Mapping[str, Role] = {
    "publishers": Role(
        grant=publisher_grant,
        withdraw=publisher_revoke,
        withdraw_sentences=PUBLISHER_REVOKE,
        granted=gettext_lazy("Adapter %(id)s may now publish to %(topic)s."),
        had=gettext_lazy("Adapter %(id)s could publish to %(topic)s already."),
        withdrawn=gettext_lazy("Adapter %(id)s may no longer publish to %(topic)s."),
    ),
    "subscribers": Role(
        grant=subscriber_allow,
        withdraw=subscriber_disallow,
        withdraw_sentences=SUBSCRIBER_DISALLOW,
        granted=gettext_lazy("The owner of adapter %(id)s may now subscribe it to %(topic)s."),
        had=gettext_lazy("The owner of adapter %(id)s could subscribe it to %(topic)s already."),
        withdrawn=gettext_lazy(
            "Adapter %(id)s may no longer subscribe to %(topic)s: its subscription, if it had "
            "one, ended."
        ),
    ),
}


def _role(name: str) -> Role:
    role = ROLES.get(name)
    if role is None:
        raise Http404
    return role


def _owned(request: HttpRequest, topic_id: int) -> Topic | None:
    """The person's own topic; None (and the reason told) for one only open to their adapters."""
    try:
        return topic_owned(cabinet_user(request), topic_id)
    except TopicNotFound:
        raise Http404 from None
    except TopicNotYours as error:
        messages.error(request, error_sentence(error, TOPIC_OWNER_ONLY))
        return None


def _names(topic: Topic, adapter_id: int) -> dict[str, object]:
    return {"id": adapter_id, "topic": topic.name}


@login_required(login_url="/login")
@require_POST
def topic_grant_page(request: HttpRequest, topic_id: int, role: str) -> HttpResponse:
    """Grant another owner's adapter, by its number, publishing (``publishers``) or the
    allowance to subscribe (``subscribers``); a number refused is told under the field, still
    typed."""
    act = _role(role)
    topic = _owned(request, topic_id)
    if topic is None:
        return redirect(BUS)
    form = card_form(topic.pk, role, request.POST)
    if form.is_valid():
        adapter_id = form.cleaned_data["adapter"]
        try:
            created = act.grant(topic=topic, adapter_id=adapter_id)
        except TopicNotFound:  # deleted meanwhile
            raise Http404 from None
        except ApplicationError as error:
            form.add_error("adapter", error_sentence(error, TOPIC_GRANT))
        else:
            done = act.granted if created else act.had
            messages.success(request, str(done) % _names(topic, adapter_id))
            return redirect(BUS)
    return _card_typed(request, topic.pk, role, form)


@login_required(login_url="/login")
@require_POST
def topic_withdraw_page(
    request: HttpRequest, topic_id: int, role: str, adapter_id: int
) -> HttpResponse:
    act = _role(role)
    topic = _owned(request, topic_id)
    if topic is None:
        return redirect(BUS)
    try:
        act.withdraw(topic=topic, adapter_id=adapter_id)
    except ApplicationError as error:
        messages.error(request, error_sentence(error, act.withdraw_sentences))
    else:
        messages.success(request, str(act.withdrawn) % _names(topic, adapter_id))
    return redirect(BUS)


@login_required(login_url="/login")
@require_POST
def subscription_put_page(request: HttpRequest, topic_id: int) -> HttpResponse:
    """Subscribe one of the person's adapters, to every type or to the types typed; again,
    change its types. A refusal is told under its field, the form as it was sent."""
    user = cabinet_user(request)
    topic = _visible(request, topic_id)
    form = card_form(topic.pk, "subscriptions", request.POST)
    if form.is_valid():
        types = form.cleaned_data["types"]
        try:
            subscription, created = subscription_put(
                user=user, topic=topic, adapter_id=form.cleaned_data["adapter"], types=types
            )
        except TopicNotFound:  # deleted meanwhile
            raise Http404 from None
        except ApplicationError as error:
            form.add_error("adapter", error_sentence(error, SUBSCRIPTION_PUT))
        else:
            messages.success(
                request,
                _subscribed(subscription.adapter.username, topic, subscription.types, created),
            )
            return redirect(BUS)
    return _card_typed(request, topic.pk, "subscriptions", form)


def _subscribed(login: str, topic: Topic, types: list[str] | None, created: bool) -> str:
    names = {"login": login, "topic": topic.name, "types": ", ".join(types or [])}
    if created and types is None:
        done = _("%(login)s is subscribed to %(topic)s: it gets a copy of every publication.")
    elif created:
        done = _(
            "%(login)s is subscribed to %(topic)s: it gets a copy of each publication of the "
            "types %(types)s."
        )
    elif types is None:
        done = _("%(login)s now gets a copy of every publication to %(topic)s.")
    else:
        done = _(
            "%(login)s now gets a copy of each publication to %(topic)s of the types %(types)s."
        )
    return done % names


@login_required(login_url="/login")
@require_POST
def subscription_delete_page(request: HttpRequest, topic_id: int, adapter_id: int) -> HttpResponse:
    """End a subscription: one of the person's adapters', or any on their own topic."""
    topic = _visible(request, topic_id)
    try:
        subscription_delete(user=cabinet_user(request), topic=topic, adapter_id=adapter_id)
    except ApplicationError as error:
        messages.error(request, error_sentence(error, SUBSCRIPTION_DELETE))
    else:
        messages.success(
            request,
            _("Adapter %(id)s is no longer subscribed to %(topic)s.") % _names(topic, adapter_id),
        )
    return redirect(BUS)


@login_required(login_url="/login")
@require_http_methods(["GET", "POST"])
def topic_delete_page(request: HttpRequest, topic_id: int) -> HttpResponse:
    """Deleting asks first: the topic's grants and subscriptions go with it."""
    topic = _owned(request, topic_id)
    if topic is None:
        return redirect(BUS)
    if request.method == "POST":
        topic_delete(topic=topic)
        messages.success(
            request,
            _(
                "The topic %(name)s is deleted with its grants and subscriptions; the copies "
                "already in queues stay."
            )
            % {"name": topic.name},
        )
        return redirect(BUS)
    [view] = topics_described(viewer=cabinet_user(request), topics=[topic])
    return render(request, "cabinet/topic_delete.html", {"view": view})


def _card_typed(request: HttpRequest, topic_id: int, name: str, form: forms.Form) -> HttpResponse:
    return bus_render(request, topic_forms=TopicFormsTyped(cards={(topic_id, name): form}))
