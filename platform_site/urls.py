"""The site's URLs: each app's, included by name (this package imports no app)."""

from django.contrib import admin
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

urlpatterns = [
    # First: the exchange API is the hot path, and Django tries the patterns in this order.
    path("api/exchange/", include("exchange.api.urls")),
    path("", RedirectView.as_view(url="/bus"), name="home"),
    # Browsers ask for /favicon.ico on pages that name no icon (the admin, the API docs).
    path("favicon.ico", RedirectView.as_view(url=static("favicon.ico"), permanent=True)),
    path("admin/", admin.site.urls),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="docs"),
    # The owner's adapters, queues and routes (/api/users/adapters...) are the exchange's.
    path("api/", include("exchange.api.owner_urls")),
    path("api/", include("accounts.api.urls")),
    path("", include("health.urls")),
    path("", include("accounts.web.urls")),
    path("", include("exchange.web.urls")),
]

handler404 = "platform_site.errors.handler404"
handler500 = "platform_site.errors.handler500"
