"""The cabinet's "Export my data" (on /settings/profile): the document of
GET /api/users/me/export as a download. It lives with the exchange because the export reads the
person's adapters, routes, topics and webhooks, which accounts knows nothing of."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET
from rest_framework.renderers import JSONRenderer

from accounts.web.flows import cabinet_user
from exchange.api.export import EXPORT_FILE, export_document


@login_required(login_url="/login")
@require_GET
def export_page(request: HttpRequest) -> HttpResponse:
    document = export_document(cabinet_user(request))
    response = HttpResponse(JSONRenderer().render(document), content_type="application/json")
    response["Content-Disposition"] = f'attachment; filename="{EXPORT_FILE}"'
    response["Cache-Control"] = "no-store"
    return response
