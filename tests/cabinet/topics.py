"""What the topic page tests share (tests/cabinet/test_topics.py, test_topic_access.py): the
parts of a /bus page they read, and a person signed in."""

from __future__ import annotations

import html
import re
from typing import Any

from django.test import Client

from accounts.models import User
from exchange.models import Topic
from tests.factories import DEFAULT_PASSWORD


def text(response: Any) -> str:
    return re.sub(r"\s+", " ", response.content.decode())


def card(page: Any, topic: Topic) -> str:
    """Topic ``topic``'s card on /bus."""
    found = re.search(
        rf'<section class="card topic" id="topic-{topic.pk}".*?(?=<section class="card|</main>)',
        text(page),
    )
    assert found is not None, text(page)
    return found.group(0)


def cards(page: Any) -> list[str]:
    return re.findall(
        r'<section class="card topic" id="topic-\d+"[^>]*data-topic="([^"]*)"', text(page)
    )


def flashed(page: Any) -> list[str]:
    return [
        html.unescape(re.sub(r"<[^>]+>", "", message)).strip()
        for message in re.findall(r'<li class="message [^"]*">(.*?)</li>', text(page))
    ]


def field_error(shown: str, field_id: str) -> str:
    found = re.search(rf'<p class="error" id="{field_id}_error">([^<]*)</p>', shown)
    assert found is not None, shown
    return html.unescape(found.group(1)).strip()


def signed_in(user: User, language: str = "en") -> Client:
    if not user.phone:  # a complete profile: no /welcome first
        User.objects.filter(pk=user.pk).update(phone="+4915123456780")
    client = Client()
    client.cookies["django_language"] = language
    answered = client.post("/login", {"login": user.email, "password": DEFAULT_PASSWORD})
    assert answered["Location"] == "/bus"
    return client
