"""What the /bus pages say when a service refuses: the sentence of the error's code
(accounts/web/sentences.py) in the page's language, never the API's English detail; and a form
value that is no number is the form's error, never a 500."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client
from django.utils import translation

from accounts.models import User
from accounts.web.sentences import ADAPTER_ACTIONS, ROUTE_WITHDRAW, error_sentence
from exchange.errors import IdempotencyKeyReused
from exchange.models import Route
from platform_site.settings import redis_caches

pytestmark = pytest.mark.django_db

NOBODY = "redis://127.0.0.1:1/0"  # a Redis that does not answer: nothing listens there


def errors_shown(page: Any) -> list[str]:
    html = re.sub(r"\s+", " ", page.content.decode())
    return [
        message.strip()
        for message in re.findall(r'<li class="[^"]*error[^"]*"[^>]*>(.*?)</li>', html)
    ]


Situation = Callable[..., Any]


def foreign_adapter_action(browser: Client, adapter: User, **_: Any) -> Any:
    return browser.post(f"/bus/adapters/{adapter.pk}/disable")


def foreign_adapter_confirmation(browser: Client, adapter: User, **_: Any) -> Any:
    return browser.get(f"/bus/adapters/{adapter.pk}/rotate")


def foreign_adapter_purge(browser: Client, adapter: User, **_: Any) -> Any:
    return browser.get(f"/bus/adapters/{adapter.pk}/purge")


def queue_full(browser: Client, mine: User, settings: Any, **_: Any) -> Any:
    settings.EXCHANGE_MAX_QUEUE_DEPTH = 0
    return browser.post(f"/bus/adapters/{mine.pk}/test-message")


def redis_away(browser: Client, mine: User, settings: Any, **_: Any) -> Any:
    # Disabling must tell every worker through Redis first; unreachable, nothing is changed.
    settings.REDIS_URL = NOBODY
    settings.CACHES = redis_caches(NOBODY)
    return browser.post(f"/bus/adapters/{mine.pk}/disable")


def withdraw_what_was_never_granted(browser: Client, mine: User, adapter: User, **_: Any) -> Any:
    return browser.post(f"/bus/adapters/{mine.pk}/withdraw", {"sender": str(adapter.pk)})


# Every code a /bus page can meet, each through a request that meets it, with the sentence
# shown in English and in Russian (whose one-letter words ruff's RUF001 takes for look-alike
# Latin).
SITUATIONS: list[tuple[Situation, str, str, str]] = [
    (
        foreign_adapter_action,
        "NOT_FOUND",
        "You have no adapter with this id.",
        "У вас нет адаптера с таким номером.",  # noqa: RUF001
    ),
    (
        foreign_adapter_confirmation,
        "NOT_FOUND",
        "You have no adapter with this id.",
        "У вас нет адаптера с таким номером.",  # noqa: RUF001
    ),
    (
        foreign_adapter_purge,
        "NOT_FOUND",
        "You have no adapter with this id.",
        "У вас нет адаптера с таким номером.",  # noqa: RUF001
    ),
    (
        queue_full,
        "QUEUE_FULL",
        "The queue is full. Try again in 5 seconds, once its adapter has taken messages off it.",
        "Очередь заполнена. Повторите через 5 с, когда её адаптер заберёт из неё сообщения.",  # noqa: RUF001
    ),
    (
        redis_away,
        "SERVICE_UNAVAILABLE",
        "The platform cannot do this for a moment, and nothing was changed. "
        "Try again in a few seconds.",
        "Платформа не может выполнить это прямо сейчас, ничего не изменено. "
        "Повторите через несколько секунд.",
    ),
    (
        withdraw_what_was_never_granted,
        "NOT_FOUND",
        "This adapter has no route from that sender.",
        "У этого адаптера нет маршрута от этого отправителя.",  # noqa: RUF001
    ),
]


def test_the_situations_walk_every_code_the_bus_pages_have_a_sentence_for():
    """The route form's own codes are told on its field (tests/cabinet/test_route_form.py)."""
    walked = {code for _, code, _, _ in SITUATIONS}

    assert walked == {*ADAPTER_ACTIONS, *ROUTE_WITHDRAW}


@pytest.mark.parametrize("language", ["en", "ru"])
@pytest.mark.parametrize(
    ("situation", "code", "english", "russian"),
    SITUATIONS,
    ids=[f"{situation.__name__}-{code}" for situation, code, _, _ in SITUATIONS],
)
def test_a_refusal_on_the_bus_is_told_by_its_code_in_the_page_language(
    browser, mine, adapter, settings, language, situation, code, english, russian
):
    browser.cookies[settings.LANGUAGE_COOKIE_NAME] = language

    answered = situation(browser=browser, mine=mine, adapter=adapter, settings=settings)
    page = browser.get(answered["Location"])

    assert answered.status_code == 302
    assert errors_shown(page) == [english if language == "en" else russian]


def test_a_code_no_table_names_is_still_a_sentence_in_the_page_language():
    with translation.override("ru"):
        russian = error_sentence(IdempotencyKeyReused())
    with translation.override("en"):
        english = error_sentence(IdempotencyKeyReused())

    assert russian == "Сейчас это сделать нельзя (IDEMPOTENCY_KEY_REUSED)."
    assert english == "This cannot be done right now (IDEMPOTENCY_KEY_REUSED)."


@pytest.mark.parametrize("sender", ["", "seven", "7.5", "0x1F", "9" * 30])
def test_a_withdrawal_whose_sender_is_no_number_names_no_route(browser, mine, adapter, sender):
    Route.objects.create(recipient=mine, sender=adapter, granted_by=mine.owner)

    answered = browser.post(f"/bus/adapters/{mine.pk}/withdraw", {"sender": sender})

    assert answered["Location"] == "/bus"
    assert errors_shown(browser.get("/bus")) == ["This adapter has no route from that sender."]
    assert Route.objects.count() == 1
