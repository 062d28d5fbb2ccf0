"""Views that fail in every way an API view can, for pinning the one error shape."""

from __future__ import annotations

from typing import Any

from django.db import OperationalError
from django.http import HttpRequest, HttpResponse
from django.urls import path
from django.utils.decorators import method_decorator
from django_ratelimit.decorators import ratelimit
from rest_framework import serializers
from rest_framework.authentication import BaseAuthentication
from rest_framework.exceptions import PermissionDenied
from rest_framework.permissions import AllowAny, IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from platform_site.errors import ApplicationError
from platform_site.serializers import Input


class PointInput(Input):
    x = serializers.IntegerField()
    y = serializers.IntegerField()


class ShapeInput(Input):
    name = serializers.CharField(max_length=20)
    sides = serializers.IntegerField(min_value=3)
    origin = PointInput(required=False)
    payload = serializers.JSONField(required=False)
    tags = serializers.ListField(
        child=serializers.CharField(max_length=1), min_length=1, max_length=2, required=False
    )


class ShapeCreateApi(APIView):
    permission_classes = [AllowAny]

    def post(self, request: Request) -> Response:
        data = ShapeInput(data=request.data)
        data.is_valid(raise_exception=True)
        return Response(data.validated_data, status=201)


class BearerOnly(BaseAuthentication):
    """Authenticates nobody, but says how one would: a 401 needs a WWW-Authenticate challenge."""

    def authenticate(self, request: Request) -> None:
        return None

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="api"'


class PrivateApi(APIView):
    authentication_classes = [BearerOnly]
    permission_classes = [IsAuthenticated]

    def get(self, request: Request) -> Response:
        return Response({})


class ForbiddenApi(APIView):
    permission_classes = [AllowAny]

    def get(self, request: Request) -> Response:
        raise PermissionDenied()


class LockedError(ApplicationError):
    status = 423
    code = "ACCOUNT_LOCKED"
    default_detail = "The account is locked."


class LockedApi(APIView):
    permission_classes = [AllowAny]

    def get(self, request: Request) -> Response:
        raise LockedError(extra={"lockedUntil": "2026-11-21T09:30:00Z"})


@method_decorator(ratelimit(key="ip", rate="1/m", block=True), name="get")
class LimitedApi(APIView):
    permission_classes = [AllowAny]

    def get(self, request: Request) -> Response:
        return Response({"ok": True})


class BrokenApi(APIView):
    permission_classes = [AllowAny]

    def get(self, request: Request) -> Response:
        raise RuntimeError("secret internals: /etc/passwd")


def broken_plain_view(request: HttpRequest) -> HttpResponse:
    raise RuntimeError("secret internals of a plain view")


def database_down_view(request: HttpRequest) -> HttpResponse:
    raise OperationalError("terminating connection due to administrator command")


def plain_page(request: HttpRequest, *args: Any) -> HttpResponse:
    return HttpResponse("<p>cabinet page</p>")


urlpatterns = [
    path("api/shapes", ShapeCreateApi.as_view()),
    path("api/private", PrivateApi.as_view()),
    path("api/forbidden", ForbiddenApi.as_view()),
    path("api/locked", LockedApi.as_view()),
    path("api/limited", LimitedApi.as_view()),
    path("api/broken", BrokenApi.as_view()),
    path("api/broken-plain", broken_plain_view),
    path("api/database-down", database_down_view),
    path("page", plain_page),
]
