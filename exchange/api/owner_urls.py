from django.urls import path

from exchange.api import export, owners, topics, traffic, webhooks

urlpatterns = [
    path("users/me/export", export.ExportApi.as_view()),
    path("users/adapters", owners.AdaptersApi.as_view()),
    path("users/adapters/<int:adapter_id>", owners.AdapterApi.as_view()),
    path("users/adapters/<int:adapter_id>/password", owners.AdapterPasswordApi.as_view()),
    path("users/adapters/<int:adapter_id>/purge", owners.AdapterPurgeApi.as_view()),
    path("users/adapters/<int:adapter_id>/traffic", traffic.AdapterTrafficApi.as_view()),
    path("users/adapters/<int:adapter_id>/routes", owners.AdapterRoutesApi.as_view()),
    path(
        "users/adapters/<int:adapter_id>/routes/<int:sender_id>", owners.AdapterRouteApi.as_view()
    ),
    path("users/adapters/<int:adapter_id>/webhook", webhooks.WebhookApi.as_view()),
    path("users/adapters/<int:adapter_id>/webhook/secret", webhooks.WebhookSecretApi.as_view()),
    path("users/adapters/<int:adapter_id>/webhook/test", webhooks.WebhookTestApi.as_view()),
    path("users/adapters/<int:adapter_id>/webhook/attempts", webhooks.WebhookAttemptsApi.as_view()),
    path("users/topics", topics.TopicsApi.as_view()),
    path("users/topics/<int:topic_id>", topics.TopicApi.as_view()),
    path("users/topics/<int:topic_id>/publishers", topics.TopicPublishersApi.as_view()),
    path(
        "users/topics/<int:topic_id>/publishers/<int:adapter_id>",
        topics.TopicPublisherApi.as_view(),
    ),
    path("users/topics/<int:topic_id>/subscribers", topics.TopicSubscribersApi.as_view()),
    path(
        "users/topics/<int:topic_id>/subscribers/<int:adapter_id>",
        topics.TopicSubscriberApi.as_view(),
    ),
    path("users/topics/<int:topic_id>/subscriptions", topics.TopicSubscriptionsApi.as_view()),
    path(
        "users/topics/<int:topic_id>/subscriptions/<int:adapter_id>",
        topics.TopicSubscriptionApi.as_view(),
    ),
]
