"""The cabinet's /bus pages: an owner's adapters, their queues, routes, webhooks, dead letters."""

from django.urls import path

from exchange.web import bus, webhooks

urlpatterns = [
    path("bus", bus.bus_page, name="bus"),
    path("bus/adapters", bus.adapter_create_page, name="adapter-create"),
    path("bus/adapters/<int:adapter_id>/purge", bus.adapter_purge_page, name="adapter-purge"),
    path("bus/adapters/<int:adapter_id>/webhook", webhooks.webhook_url_page, name="webhook"),
    path(
        "bus/adapters/<int:adapter_id>/webhook/<slug:action>",
        webhooks.webhook_action_page,
        name="webhook-action",
    ),
    path(
        "bus/adapters/<int:adapter_id>/<slug:action>",
        bus.adapter_action_page,
        name="adapter-action",
    ),
    path("bus/dead-letters/redrive", bus.redrive_page, name="redrive"),
]
