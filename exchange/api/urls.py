from django.urls import path

from exchange.api import publishing, stream, views

urlpatterns = [
    path("whoami", views.WhoAmIApi.as_view()),
    path("messages", views.MessagesApi.as_view()),
    path("messages/batch", views.MessagesBatchApi.as_view()),
    path("messages/stream", stream.MessagesStreamApi.as_view()),
    path("messages/ack", views.MessagesAckApi.as_view()),
    path("messages/nack", views.MessagesNackApi.as_view()),
    path("messages/lease", views.MessagesLeaseApi.as_view()),
    path("messages/<uuid:message_id>/ack", views.MessageAckApi.as_view()),
    path("stats", views.StatsApi.as_view()),
    path("topics/<int:topic_id>/messages", publishing.TopicMessagesApi.as_view()),
    path("topics/<int:topic_id>/messages/batch", publishing.TopicMessagesBatchApi.as_view()),
]
