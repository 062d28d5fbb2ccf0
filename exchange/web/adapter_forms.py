"""The forms of an adapter's own page (/bus/adapters/{id}): its display name and a test message
of the person's own; and how the page shows a message's payload."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django import forms
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from accounts.services.adapters import DISPLAY_NAME_MAX_LENGTH
from platform_site.errors import MalformedBody
from platform_site.parsers import json_strict

TYPE_LENGTH = 128  # Message.type's
SHOWN_BYTES = 4096  # of a payload on the page: the rest is said in a number
TEST_TYPE = "cabinet.test"
TEST_PAYLOAD = '{\n  "text": "A test message from the cabinet."\n}'


class AdapterNameForm(forms.Form):
    display_name = forms.CharField(
        label=_("Display name"),
        required=False,
        max_length=DISPLAY_NAME_MAX_LENGTH,
        help_text=_("Shown beside its login, for people. Empty: none."),
        error_messages={
            "max_length": _("A display name is at most %(limit_value)d characters long.")
        },
        widget=forms.TextInput(attrs={"autocomplete": "off"}),
    )


class OwnMessageForm(forms.Form):
    type = forms.CharField(
        label=_("Type"),
        max_length=TYPE_LENGTH,
        error_messages={"required": _("Enter the message's type.")},
        widget=forms.TextInput(
            attrs={"autocomplete": "off", "autocapitalize": "none", "spellcheck": "false"}
        ),
    )
    payload = forms.CharField(
        label=_("Payload (JSON)"),
        strip=False,
        error_messages={"required": _("Enter the payload as JSON.")},
        widget=forms.Textarea(attrs={"rows": 6, "spellcheck": "false", "class": "payload"}),
    )

    def clean_payload(self) -> Any:
        """The payload parsed as the API parses a body (platform_site.parsers.json_strict), and
        not null (a message has one)."""
        try:
            payload = json_strict(self.cleaned_data["payload"])
        except MalformedBody:
            raise forms.ValidationError(
                _('This is not JSON. Enter, for example, {"text": "Hello"}.')
            ) from None
        if payload is None:
            raise forms.ValidationError(_("Enter a payload other than null."))
        return payload


def own_message_form(data: Mapping[str, Any] | None = None) -> OwnMessageForm:
    return OwnMessageForm(data, initial={"type": TEST_TYPE, "payload": TEST_PAYLOAD})


@dataclass(frozen=True)
class PayloadShown:
    """A payload as the page shows it: JSON indented by two, its first SHOWN_BYTES bytes."""

    text: str
    size: int  # bytes of the whole indented text, in UTF-8

    @property
    def cut(self) -> bool:
        return self.size > SHOWN_BYTES

    @property
    def rest(self) -> str:
        """What follows a cut payload: how long it is in all."""
        if not self.cut:
            return ""
        return ngettext("… (%(count)s byte in all)", "… (%(count)s bytes in all)", self.size) % {
            "count": self.size
        }


def payload_shown(payload: Any) -> PayloadShown:
    text = json.dumps(payload, indent=2, ensure_ascii=False)
    encoded = text.encode()
    # Cut on a byte: a character cut in two is left out whole.
    return PayloadShown(encoded[:SHOWN_BYTES].decode(errors="ignore"), len(encoded))
