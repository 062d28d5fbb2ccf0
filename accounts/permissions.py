"""Who may call what: adapters the exchange API, cabinet users their own (contract section 2)."""

from __future__ import annotations

from typing import Any

from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from accounts.services.tokens import ROLE_ADAPTER, ROLE_USER


def _role(request: Request) -> str | None:
    auth = getattr(request, "auth", None)
    return getattr(getattr(auth, "claims", None), "role", None)


class IsAdapter(BasePermission):
    message = "Only adapters may use the exchange API."

    def has_permission(self, request: Request, view: Any) -> bool:
        return _role(request) == ROLE_ADAPTER


class IsCabinetUser(BasePermission):
    message = "Only cabinet users may use this API."

    def has_permission(self, request: Request, view: Any) -> bool:
        return _role(request) == ROLE_USER
