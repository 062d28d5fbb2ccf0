"""The cabinet's /bus pages: an owner's adapters, each with a page of its own, their queues,
routes, webhooks, dead letters, and topics; and the profile page's export of the person's
data."""

from django.urls import path

from exchange.web import adapter_page, bus, export, routes, topics, webhooks

urlpatterns = [
    path("bus", bus.bus_page, name="bus"),
    path("settings/profile/export", export.export_page, name="profile-export"),
    path("bus/adapters", bus.adapter_create_page, name="adapter-create"),
    path("bus/adapters/<int:adapter_id>", adapter_page.adapter_page, name="adapter"),
    path("bus/adapters/<int:adapter_id>/name", adapter_page.adapter_name_page, name="adapter-name"),
    path(
        "bus/adapters/<int:adapter_id>/message",
        adapter_page.adapter_message_page,
        name="adapter-message",
    ),
    path(
        "bus/adapters/<int:adapter_id>/dead-letters/discard",
        adapter_page.dead_letters_discard_page,
        name="dead-letters-discard",
    ),
    path(
        "bus/adapters/<int:adapter_id>/delete",
        adapter_page.adapter_delete_page,
        name="adapter-delete",
    ),
    path("bus/adapters/<int:adapter_id>/purge", bus.adapter_purge_page, name="adapter-purge"),
    path("bus/adapters/<int:adapter_id>/webhook", webhooks.webhook_url_page, name="webhook"),
    path(
        "bus/adapters/<int:adapter_id>/webhook/<slug:action>",
        webhooks.webhook_action_page,
        name="webhook-action",
    ),
    path("bus/adapters/<int:adapter_id>/grant", routes.route_grant_page, name="route-grant"),
    path(
        "bus/adapters/<int:adapter_id>/<slug:action>",
        bus.adapter_action_page,
        name="adapter-action",
    ),
    path("bus/dead-letters/redrive", bus.redrive_page, name="redrive"),
    path("bus/topics", topics.topic_create_page, name="topic-create"),
    path("bus/topics/<int:topic_id>/delete", topics.topic_delete_page, name="topic-delete"),
    path(
        "bus/topics/<int:topic_id>/subscriptions",
        topics.subscription_put_page,
        name="topic-subscribe",
    ),
    path(
        "bus/topics/<int:topic_id>/subscriptions/<int:adapter_id>/delete",
        topics.subscription_delete_page,
        name="topic-unsubscribe",
    ),
    path("bus/topics/<int:topic_id>/<slug:role>", topics.topic_grant_page, name="topic-grant"),
    path(
        "bus/topics/<int:topic_id>/<slug:role>/<int:adapter_id>/withdraw",
        topics.topic_withdraw_page,
        name="topic-withdraw",
    ),
]
