"""The forms in which e-mail addresses and logins are compared (docs/users-api.md, "Addresses
and logins").

An e-mail address is compared in its canonical form: Unicode NFKC, then case folding of the
whole address. So the KELVIN SIGN (U+212A) is a K, the long s (U+017F) an s, and full-width
letters their plain ones, and none of them can register a second account beside the plain
address, or take the codes meant for it. An address is stored as typed, but only a plain one:
already in NFKC, and one whose case folding is no more than lower-casing (not ß, whose folding is
ss). Then every stored address that shares a canonical form with another differs from it in
case alone, and reaches the same mailbox: codes go only to the stored address, and its owner
can always get in. The dotless i (U+0131) folds to itself: it and i make two addresses.

Logins stay case-sensitive, but are stored in NFKC (an adapter's login is ASCII; Django's forms
and createsuperuser normalise the rest), and a typed login is read in NFKC, as Django's own
sign-in form reads it, so that two look-alike logins cannot both exist.
"""

from __future__ import annotations

import unicodedata

from django.core.exceptions import ValidationError
from django.utils.translation import gettext_lazy as _

LOOKALIKE_EMAIL = _(
    "Type the address in plain characters: it contains characters that stand for others "
    "(such as the Kelvin sign, a long s, full-width letters or ß)."
)


def _nfkc(text: str) -> str:
    return unicodedata.normalize("NFKC", text)


def email_canonical(address: str) -> str:
    """What ``address`` is compared as: NFKC, case-folded whole, NFKC again (folding can
    un-normalise), without surrounding white space."""
    return _nfkc(_nfkc(address.strip()).casefold())


def email_is_plain(address: str) -> bool:
    """Already in NFKC, and its case folding is a lower-casing: what it looks like."""
    return _nfkc(address) == address and email_canonical(address) == address.strip().lower()


def validate_plain_email(address: str) -> None:
    """A model and form validator: refuses addresses with characters that stand for others."""
    if not email_is_plain(address):
        raise ValidationError(LOOKALIKE_EMAIL, code="lookalike_email")


def identifier_key(kind: str, identifier: str) -> str:
    """``kind:identifier`` in canonical form: what rate limits and the sign-in gate of an
    unknown account count under, so that look-alikes of one name share a counter."""
    if kind == "email":
        return f"email:{email_canonical(identifier)}"
    return f"{kind}:{login_canonical(identifier)}"


def login_canonical(login: str) -> str:
    """The form a login is stored and looked up in: NFKC, case kept."""
    return _nfkc(login)
