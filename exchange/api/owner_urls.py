from django.urls import path

from exchange.api import owners, webhooks

urlpatterns = [
    path("users/adapters", owners.AdaptersApi.as_view()),
    path("users/adapters/<int:adapter_id>", owners.AdapterApi.as_view()),
    path("users/adapters/<int:adapter_id>/password", owners.AdapterPasswordApi.as_view()),
    path("users/adapters/<int:adapter_id>/purge", owners.AdapterPurgeApi.as_view()),
    path("users/adapters/<int:adapter_id>/routes", owners.AdapterRoutesApi.as_view()),
    path(
        "users/adapters/<int:adapter_id>/routes/<int:sender_id>", owners.AdapterRouteApi.as_view()
    ),
    path("users/adapters/<int:adapter_id>/webhook", webhooks.WebhookApi.as_view()),
    path("users/adapters/<int:adapter_id>/webhook/secret", webhooks.WebhookSecretApi.as_view()),
    path("users/adapters/<int:adapter_id>/webhook/test", webhooks.WebhookTestApi.as_view()),
    path("users/adapters/<int:adapter_id>/webhook/attempts", webhooks.WebhookAttemptsApi.as_view()),
]
