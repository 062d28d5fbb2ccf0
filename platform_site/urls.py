from django.contrib import admin
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from accounts.dev import dev_outbox
from accounts.session_rules import Action, performs
from accounts.web.profile import language_switch_page

urlpatterns = [
    # First: the exchange API is the hot path, and Django tries the patterns in this order.
    path("api/exchange/", include("exchange.api.urls")),
    path("", RedirectView.as_view(url="/bus"), name="home"),
    # Browsers ask for /favicon.ico on pages that name no icon (the admin, the API docs).
    path("favicon.ico", RedirectView.as_view(url=static("favicon.ico"), permanent=True)),
    path("admin/", admin.site.urls),
    path("dev/outbox", performs(Action.PAGE_SUPPORT)(dev_outbox), name="dev-outbox"),
    # Django's set_language, which also keeps a signed-in person's choice on the account.
    path("i18n/setlang/", performs(Action.PAGE_SUPPORT)(language_switch_page), name="set_language"),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="docs"),
    path("api/", include("accounts.api.urls")),
    path("", include("health.urls")),
    path("", include("accounts.web.urls")),
]

handler404 = "platform_site.errors.handler404"
handler500 = "platform_site.errors.handler500"
