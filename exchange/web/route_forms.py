"""The route form of an adapter's card on /bus: another owner's adapter, by its login, that may
send to this one. The page that grants is exchange/web/routes.py."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django import forms
from django.utils.translation import gettext_lazy as _

LOGIN_LENGTH = 150  # User.username's


class RouteGrantForm(forms.Form):
    sender = forms.CharField(
        label=_("Login of the adapter that may send"),
        max_length=LOGIN_LENGTH,
        help_text=_("An adapter of another owner: your own adapters may send to each other."),
        error_messages={"required": _("Enter the login of another owner's adapter.")},
        widget=forms.TextInput(
            attrs={"autocomplete": "off", "autocapitalize": "none", "spellcheck": "false"}
        ),
    )


def route_form(adapter_id: int, data: Mapping[str, Any] | None = None) -> RouteGrantForm:
    """The route form of one adapter's card (its ids are the card's own: /bus shows many), as
    sent or empty."""
    return RouteGrantForm(data, auto_id=f"id_route_{adapter_id}_%s")
