"""Granting a route from an adapter's card on /bus or from its own page: the sender by its login,
through the service the JSON API uses (exchange/services/routes.py). A login it refuses stays
typed in the form, with the reason under the field."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from accounts.services.adapters import adapter_for_owner
from accounts.web.flows import cabinet_user
from accounts.web.sentences import ROUTE_GRANT, error_sentence
from exchange.services.routes import route_grant
from exchange.web.adapter_page import page_again
from exchange.web.adapter_scope import return_to
from exchange.web.route_forms import route_form
from platform_site.errors import ApplicationError


@login_required(login_url="/login")
@require_POST
def route_grant_page(request: HttpRequest, adapter_id: int) -> HttpResponse:
    owner = cabinet_user(request)
    try:
        adapter = adapter_for_owner(owner=owner, adapter_id=adapter_id)
    except ApplicationError as error:
        messages.error(request, error_sentence(error))
        return redirect("/bus")
    form = route_form(adapter.pk, request.POST)
    if form.is_valid():
        try:
            route, _created = route_grant(
                recipient=adapter, sender_login=form.cleaned_data["sender"], granted_by=owner
            )
        except ApplicationError as error:
            form.add_error("sender", error_sentence(error, ROUTE_GRANT))
        else:
            messages.success(
                request,
                _("%(sender)s may now send to %(login)s.")
                % {"sender": route.sender.username, "login": adapter.username},
            )
            return redirect(return_to(request))
    return page_again(request, adapter, route_typed=form)
