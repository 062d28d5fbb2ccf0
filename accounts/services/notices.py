"""Security notices: the e-mails that tell a person something happened to their account
(docs/users-api.md, "Security notices").

Each says what happened, when (in UTC, said so), from where (the device and IP address of the
request that did it) and what to do if it was not them; in the person's language (the account's
``language``, else the request's). They leave through the outbox like every e-mail. Only cabinet
users with an address get them: an adapter's own events notify nobody, except its new password,
of which its owner is told.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from django.conf import settings
from django.http import HttpRequest
from django.utils import timezone, translation
from django.utils.translation import gettext_lazy as _

from accounts.devices import Device
from accounts.models import OutboxMessage, Session, User
from accounts.services.outbox import outbox_email
from accounts.user_agents import user_agent_describe
from platform_site.clients import client_ip
from platform_site.timestamps import utc_display

# A sign-in from a device without a session used in this many days is announced.
NEW_DEVICE_DAYS = 30


class Notice(StrEnum):
    NEW_DEVICE_SIGN_IN = "new_device_sign_in"
    PASSWORD_CHANGED = "password_changed"  # noqa: S105 (a notice's name)
    PASSWORD_RESET = "password_reset"  # noqa: S105 (a notice's name)
    ACCOUNT_LOCKED = "account_locked"
    TWO_FACTOR_ENABLED = "two_factor_enabled"
    TWO_FACTOR_CHANGED = "two_factor_changed"
    TWO_FACTOR_DISABLED = "two_factor_disabled"
    FACTOR_ADDED = "factor_added"
    FACTOR_REMOVED = "factor_removed"
    TWO_FACTOR_RESET = "two_factor_reset"
    RECOVERY_CODE_USED = "recovery_code_used"
    RECOVERY_CODES_REPLACED = "recovery_codes_replaced"
    ADAPTER_PASSWORD_ROTATED = "adapter_password_rotated"  # noqa: S105 (a notice's name)
    ADAPTER_WEBHOOK_DISABLED = "adapter_webhook_disabled"
    EMAIL_CHANGED = "email_changed"
    ACCOUNT_DELETED = "account_deleted"


# What happened, as the subject and as the first sentence.
SUBJECTS: dict[Notice, Any] = {
    Notice.NEW_DEVICE_SIGN_IN: _("New sign-in to your account"),
    Notice.PASSWORD_CHANGED: _("Your password was changed"),
    Notice.PASSWORD_RESET: _("Your password was reset"),
    Notice.ACCOUNT_LOCKED: _("Your account is locked"),
    Notice.TWO_FACTOR_ENABLED: _("Two-factor sign-in was turned on"),
    Notice.TWO_FACTOR_CHANGED: _("Your second factor was changed"),
    Notice.TWO_FACTOR_DISABLED: _("Two-factor sign-in was turned off"),
    Notice.FACTOR_ADDED: _("A second factor was added"),
    Notice.FACTOR_REMOVED: _("A second factor was removed"),
    Notice.TWO_FACTOR_RESET: _("An administrator reset your two-factor sign-in"),
    Notice.RECOVERY_CODE_USED: _("A recovery code was used"),
    Notice.RECOVERY_CODES_REPLACED: _("You have new recovery codes"),
    Notice.ADAPTER_PASSWORD_ROTATED: _("An adapter got a new password"),
    Notice.ADAPTER_WEBHOOK_DISABLED: _("An adapter's webhook was turned off"),
    Notice.EMAIL_CHANGED: _("Your e-mail address was changed"),
    Notice.ACCOUNT_DELETED: _("Your account was deleted"),
}
HEADLINES: dict[Notice, Any] = {
    Notice.NEW_DEVICE_SIGN_IN: _(
        "Your account was signed into from a device that has not been used with it in the "
        "last 30 days."
    ),
    Notice.PASSWORD_CHANGED: _(
        "The password of your account was changed. Every session was signed out."
    ),
    Notice.PASSWORD_RESET: _(
        "The password of your account was reset with a code sent to this address. Every "
        "session was signed out."
    ),
    Notice.ACCOUNT_LOCKED: _(
        "Your account is locked until %(until)s after too many wrong passwords or codes in a row."
    ),
    Notice.TWO_FACTOR_ENABLED: _(
        "Two-factor sign-in was turned on for your account: signing in now also asks for "
        "%(method)s."
    ),
    Notice.TWO_FACTOR_CHANGED: _(
        "The second factor of your account was changed: signing in now asks for %(method)s."
    ),
    Notice.TWO_FACTOR_DISABLED: _(
        "Two-factor sign-in was turned off for your account. Signing in now needs only your "
        "password."
    ),
    Notice.FACTOR_ADDED: _(
        "A second factor was added to your account: signing in may now also ask for %(method)s."
    ),
    Notice.FACTOR_REMOVED: _(
        "A second factor was removed from your account: signing in no longer asks for "
        "%(method)s. Two-factor sign-in stays on with your other factors."
    ),
    Notice.TWO_FACTOR_RESET: _(
        "An administrator turned two-factor sign-in off for your account, with its passkeys and "
        "recovery codes. Signing in now needs only your password."
    ),
    Notice.RECOVERY_CODE_USED: _(
        "A recovery code was used to sign in to your account. Recovery codes left: %(remaining)s."
    ),
    Notice.RECOVERY_CODES_REPLACED: _(
        "New recovery codes were made for your account; the old ones no longer work."
    ),
    Notice.ADAPTER_PASSWORD_ROTATED: _(
        "Your adapter %(adapter)s got a new password. The old one, and every session signed "
        "in with it, no longer work."
    ),
    Notice.ADAPTER_WEBHOOK_DISABLED: _(
        "The webhook of your adapter %(adapter)s was turned off: %(reason)s Its messages wait in "
        "its queue until you turn the webhook on again or delete it."
    ),
    Notice.EMAIL_CHANGED: _(
        "The e-mail address of your account was changed from this one to %(email)s. Its "
        "notices now go there, and every other session was signed out."
    ),
    Notice.ACCOUNT_DELETED: _(
        "Your account was deleted, with its adapters, their queues, routes, webhooks and "
        "topics. Its personal data is erased; this address can register again."
    ),
}
# Why the platform turned a webhook off (exchange.models.Webhook.DisabledReason).
WEBHOOK_REASONS: dict[str, Any] = {
    "GONE": _("its endpoint answered 410 Gone."),
    "FAILING": _("its endpoint has failed for days without a single success."),
}
METHODS: dict[str, Any] = {
    "SMS": _("a code sent by SMS"),
    "TOTP": _("a code from your authenticator app"),
    "PASSKEY": _("a passkey"),
}
ADVICE = _(
    "If this was not you, reset your password at once and check the sessions and the "
    "two-factor sign-in on the Security page; if you cannot sign in, contact your administrator."
)
ADVICE_WEBHOOK = _(
    "Check the endpoint and the webhook's delivery log on the Adapters page, then turn the "
    "webhook on again there."
)
ADVICE_LOCKED = _(
    "If these attempts were not yours, someone may know your password: once the lock ends, or "
    "right away by resetting it, choose a new password."
)

ADVICE_EMAIL_CHANGED = _(
    "If this was not you, someone may have taken over your account: contact your administrator "
    "at once, who can give the account its address back and sign everyone out."
)
ADVICE_DELETED = _(
    "If this was not you, contact your administrator at once: the account cannot be restored, "
    "but what happened can be looked into."
)

ADVICES = {
    Notice.ACCOUNT_LOCKED: ADVICE_LOCKED,
    Notice.ADAPTER_WEBHOOK_DISABLED: ADVICE_WEBHOOK,
    Notice.EMAIL_CHANGED: ADVICE_EMAIL_CHANGED,
    Notice.ACCOUNT_DELETED: ADVICE_DELETED,
}


def device_is_new(*, user: User, device: Device, now: datetime) -> bool:
    """A device the account has not used in NEW_DEVICE_DAYS, for an account that has signed in
    before (a first sign-in is no news)."""
    sessions = Session.objects.filter(user=user)
    if not sessions.exists():
        return False
    recently = now - timedelta(days=NEW_DEVICE_DAYS)
    return not sessions.filter(device_key=device.key, last_used_at__gte=recently).exists()


def _origin(request: HttpRequest | None, device: Device | None) -> tuple[str, str]:
    """The device (as its User-Agent names it) and IP address a notice names."""
    if device is not None:
        user_agent, device_id, ip = device.user_agent, device.device_id, device.ip
    elif request is not None:
        user_agent = request.META.get("HTTP_USER_AGENT", "")[:512]
        device_id = request.META.get("HTTP_X_DEVICE_ID", "")[:128]
        ip = client_ip(request)
    else:
        return str(_("the platform's administration")), "-"
    client = user_agent_describe(user_agent)
    named = " · ".join(part for part in (client.browser, client.system, client.device) if part)
    if device_id:
        named = f"{named} ({device_id})" if named else device_id
    return named or str(_("an unnamed device")), ip or "-"


def notice_send(
    kind: Notice,
    *,
    user: User | None,
    request: HttpRequest | None = None,
    device: Device | None = None,
    at: datetime | None = None,
    decoy_address: str = "",
    to: str = "",
    language: str = "",
    **details: Any,
) -> OutboxMessage | None:
    """Queue ``kind``'s notice to ``user`` (None when they have no address to tell). ``details``
    fill the sentence: ``until``, ``method``, ``remaining``, ``adapter``, ``reason``. Without a
    request or device the notice says the administration did it.

    ``user`` None with a ``decoy_address`` (a lock of an unknown e-mail address) writes the
    notice all the same, for nobody: the outbox skips it, and the request did the work a real
    account's would (docs/sessions.md, "Signing in").

    ``to`` tells another address than the account's, in ``language`` or the account's: the old
    one of a changed address, or that of an account just deleted (``user`` None).
    """
    if to:
        return _queue(
            kind,
            to=to,
            user=user,
            language=language or (user.language if user is not None else ""),
            request=request,
            device=device,
            at=at,
            details=details,
            requires_account=False,
        )
    if user is None:
        if not decoy_address:
            return None
        return _queue(
            kind,
            to=decoy_address,
            user=None,
            language="",
            request=request,
            device=device,
            at=at,
            details=details,
            requires_account=True,
        )
    if user.kind != User.Kind.USER or not user.email:
        return None
    return _queue(
        kind,
        to=user.email,
        user=user,
        language=user.language,
        request=request,
        device=device,
        at=at,
        details=details,
        requires_account=False,
    )


def _queue(
    kind: Notice,
    *,
    to: str,
    user: User | None,
    language: str,
    request: HttpRequest | None,
    device: Device | None,
    at: datetime | None,
    details: dict[str, Any],
    requires_account: bool,
) -> OutboxMessage:
    language = language or translation.get_language() or settings.LANGUAGE_CODE
    with translation.override(language):
        if kind == Notice.ADAPTER_WEBHOOK_DISABLED:
            where, ip = str(_("the platform's webhook delivery")), "-"
        else:
            where, ip = _origin(request, device)
        values = dict(details)
        if "reason" in values:
            values["reason"] = str(WEBHOOK_REASONS[values["reason"]])
        if "method" in values:
            values["method"] = str(METHODS[values["method"]])
        if "until" in values:
            values["until"] = utc_display(values["until"])
        context = {
            "subject": str(SUBJECTS[kind]),
            "headline": str(HEADLINES[kind]) % values,
            "when": utc_display(at or timezone.now()),
            "where": where,
            "ip": ip,
            "advice": str(ADVICES.get(kind, ADVICE)),
        }
        return outbox_email(
            to=to,
            template="security_notice",
            context=context,
            user=user,
            requires_account=requires_account,
            label=f"notice_{kind.value}",
        )
