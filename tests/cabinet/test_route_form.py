"""The route form of an adapter's card on /bus (docs/cabinet.md, "The routes section"): another owner's adapter by its login;
a login the service refuses stays typed, with the reason under the field, in the page's language;
the card lists its routes' senders by login and display name, as it names its adapters."""

from __future__ import annotations

import html as entities
import re
from typing import Any

import pytest

from accounts.models import User
from exchange.models import Route
from exchange.services.topics import publisher_grant, topic_create
from tests.cabinet.topics import card
from tests.factories import AdapterFactory, UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def stranger(db: Any) -> User:
    """Another owner's adapter, with a display name."""
    other = UserFactory.create(username="other", email="other@example.com")
    return AdapterFactory.create(username="shop-7", owner=other, display_name="Web shop")


def field_of(page: Any, adapter: User) -> tuple[str, str]:
    """The route form's typed value and the error under its field."""
    html = page.content.decode()
    field = re.search(rf'<input[^>]*id="id_route_{adapter.pk}_sender"[^>]*>', html)
    assert field is not None
    value = re.search(r'value="([^"]*)"', field.group(0))
    error = re.search(rf'<p class="error" id="id_route_{adapter.pk}_sender_error">(.*?)</p>', html)
    assert error is not None
    return (value.group(1) if value else "", entities.unescape(error.group(1).strip()))


def test_a_route_is_granted_by_the_senders_login(browser, mine, stranger):
    answered = browser.post(f"/bus/adapters/{mine.pk}/grant", {"sender": "shop-7"})

    assert answered["Location"] == "/bus"
    assert Route.objects.get().sender == stranger
    page = browser.get("/bus")
    assert "shop-7 may now send to billing." in page.content.decode()
    assert re.search(
        rf'<li data-sender="{stranger.pk}">shop-7 <em class="display-name">Web shop</em> '
        rf"<small>#{stranger.pk}</small>",
        page.content.decode(),
    )


CASES = [
    ("nobody-here", "There is no adapter with this login.", "Адаптера с таким логином нет."),  # noqa: RUF001
    ("other", "There is no adapter with this login.", "Адаптера с таким логином нет."),  # noqa: RUF001
    (
        "billing",
        "This is one of your adapters: they may send to each other already. "
        "Enter another owner's adapter.",
        "Это ваш адаптер: ваши адаптеры уже могут отправлять друг другу. "
        "Укажите адаптер другого владельца.",
    ),
    (
        "",
        "Enter the login of another owner's adapter.",
        "Введите логин адаптера другого владельца.",
    ),
]


@pytest.mark.parametrize("language", ["en", "ru"])
@pytest.mark.parametrize(
    ("typed", "english", "russian"),
    CASES,
    ids=["unknown login", "a cabinet user's login", "own adapter", "empty"],
)
def test_a_refused_login_stays_typed_with_its_error_on_the_field(
    browser, mine, stranger, settings, language, typed, english, russian
):
    browser.cookies[settings.LANGUAGE_COOKIE_NAME] = language

    page = browser.post(f"/bus/adapters/{mine.pk}/grant", {"sender": typed})

    assert page.status_code == 200
    assert field_of(page, mine) == (typed, english if language == "en" else russian)
    assert '<details class="routes" open>' in page.content.decode()
    assert not Route.objects.exists()


def test_another_owners_adapter_is_no_card_to_grant_on(browser, stranger):
    answered = browser.post(f"/bus/adapters/{stranger.pk}/grant", {"sender": "shop-7"})

    assert answered["Location"] == "/bus"
    assert not Route.objects.exists()


def test_the_cards_name_adapters_with_their_display_names(browser, mine):
    mine.display_name = "Billing <main>"
    mine.save()

    html = browser.get("/bus").content.decode()

    assert 'billing <em class="display-name">Billing &lt;main&gt;</em>' in html


def test_a_topics_granted_adapters_are_named_with_their_display_names(browser, person, stranger):
    topic = topic_create(owner=person, name="orders")
    publisher_grant(topic=topic, adapter_id=stranger.pk)

    shown = card(browser.get("/bus"), topic)

    assert (
        f'<li data-adapter="{stranger.pk}">shop-7 <em class="display-name">Web shop</em> '
        f"<small>#{stranger.pk}</small>"
    ) in shown
