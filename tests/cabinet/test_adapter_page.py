"""An adapter's own page in the cabinet, /bus/adapters/{id} (docs/cabinet.md, "An adapter's
page"), through Django's test client as its signed-in owner: what it shows, each of its actions
through the services the JSON API uses, the pages that ask first, and the way back."""

from __future__ import annotations

import html as entities
import json
import re
import uuid
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from django.utils.html import escape

from accounts.models import AuditEvent, Session, User
from exchange.models import DeadLetter, Message, Route, Subscription, Webhook
from exchange.services.publishing import Publishing, topic_publish
from exchange.services.sending import message_send
from exchange.services.topics import (
    publisher_grant,
    subscriber_allow,
    subscription_put,
    topic_create,
)
from exchange.web.adapter_forms import SHOWN_BYTES
from tests.factories import DEFAULT_PASSWORD, AdapterFactory, UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def mine(person: User) -> User:
    return AdapterFactory.create(username="billing", owner=person, display_name="Billing")


@pytest.fixture
def stranger(db: Any) -> User:
    """Another owner's adapter, with a display name."""
    other = UserFactory.create(username="other", email="other@example.com")
    return AdapterFactory.create(username="shop-7", owner=other, display_name="Web shop")


def text_of(response: Any) -> str:
    """The page's HTML with its whitespace runs made one space."""
    return re.sub(r"\s+", " ", response.content.decode())


def dead_letter(adapter: User, payload: Any = None, **fields: Any) -> DeadLetter:
    return DeadLetter.objects.create(
        message_id=fields.pop("message_id", uuid.uuid4()),
        recipient=adapter,
        type=fields.pop("type", "order.failed"),
        payload={"n": 1} if payload is None else payload,
        headers=fields.pop("headers", {}),
        enqueued_at=timezone.now(),
        receive_count=fields.pop("receive_count", 10),
        reason=fields.pop("reason", "MAX_DELIVERIES"),
    )


def sent_to(adapter: User, payload: Any, **fields: Any) -> uuid.UUID:
    return message_send(
        sender=adapter,
        to=adapter.pk,
        type=fields.get("type", "order.created"),
        payload=payload,
        headers=fields.get("headers", {}),
        idempotency_key=None,
    ).message_id


def field_error(page: Any, field_id: str) -> str:
    found = re.search(rf'<p class="error" id="{field_id}_error">(.*?)</p>', page.content.decode())
    assert found is not None, field_id
    return entities.unescape(found.group(1).strip())


def test_the_cards_on_bus_link_to_each_adapters_page(browser, mine):
    html = browser.get("/bus").content.decode()

    assert (
        f'<a href="/bus/adapters/{mine.pk}" class="adapter-link">billing '
        '<em class="display-name">Billing</em></a>'
    ) in html


@pytest.mark.parametrize("whose", ["another owner's", "unknown"])
def test_no_page_for_an_adapter_that_is_not_the_persons(browser, stranger, whose):
    adapter_id = stranger.pk if whose == "another owner's" else stranger.pk + 1000

    for path in (
        f"/bus/adapters/{adapter_id}",
        f"/bus/adapters/{adapter_id}/dead-letters/discard",
        f"/bus/adapters/{adapter_id}/delete",
    ):
        assert browser.get(path).status_code == 404, path
    assert browser.post(f"/bus/adapters/{adapter_id}/delete").status_code == 404
    assert browser.post(f"/bus/adapters/{adapter_id}/name", {"display_name": "x"}).status_code == (
        404
    )
    assert User.objects.filter(pk=stranger.pk).exists()


def test_a_signed_out_visitor_is_sent_to_sign_in(mine):
    answered = Client().get(f"/bus/adapters/{mine.pk}")

    assert answered.status_code == 302
    assert answered["Location"].startswith("/login")


def test_the_page_shows_the_figures_its_card_has(browser, mine, settings):
    settings.EXCHANGE_MAX_QUEUE_DEPTH = 3
    for n in range(3):
        sent_to(mine, {"n": n})
    dead_letter(mine)

    page = text_of(browser.get(f"/bus/adapters/{mine.pk}"))

    assert 'billing <em class="display-name">Billing</em>' in page
    assert 'data-figure="available">3</dd>' in page
    assert 'data-figure="in-flight">0</dd>' in page
    assert 'data-figure="dead-letters">1</dd>' in page
    assert 'data-figure="limit">3 / 3</dd>' in page
    assert 'data-badge="full"' in page
    assert 'data-figure="sessions">0</dd>' in page
    assert '<section class="card" id="traffic" aria-labelledby="traffic-title">' in page


def test_the_display_name_is_changed_and_cleared(browser, mine):
    renamed = browser.post(f"/bus/adapters/{mine.pk}/name", {"display_name": "  Invoices  "})
    mine.refresh_from_db()
    named = mine.display_name
    page = text_of(browser.get(f"/bus/adapters/{mine.pk}"))
    cleared = browser.post(f"/bus/adapters/{mine.pk}/name", {"display_name": ""}, follow=True)
    mine.refresh_from_db()

    assert renamed["Location"] == f"/bus/adapters/{mine.pk}"
    assert named == "Invoices"
    assert "billing is now called Invoices." in page
    assert mine.display_name == ""
    assert "billing has no display name now." in text_of(cleared)


@pytest.mark.parametrize(
    ("language", "error"),
    [
        ("en", "A display name is at most 100 characters long."),
        ("ru", "Отображаемое имя — не длиннее 100 символов."),
    ],
)
def test_a_display_name_too_long_stays_typed_with_its_error_on_the_field(
    browser, mine, language, error
):
    browser.cookies[django_settings.LANGUAGE_COOKIE_NAME] = language
    typed = "x" * 101

    page = browser.post(f"/bus/adapters/{mine.pk}/name", {"display_name": typed})
    mine.refresh_from_db()

    assert page.status_code == 200
    assert field_error(page, "id_display_name") == error
    assert f'value="{typed}"' in page.content.decode()
    assert mine.display_name == "Billing"


def test_its_sessions_are_listed_and_ended_from_the_page(browser, mine, client):
    adapter_client = Client(HTTP_X_DEVICE_ID="scanner-7", HTTP_USER_AGENT="python-httpx/0.28.1")
    signed_in = adapter_client.post(
        "/api/auth/login/username",
        {"username": "billing", "password": DEFAULT_PASSWORD},
        content_type="application/json",
    )
    assert signed_in.status_code == 200

    page = text_of(browser.get(f"/bus/adapters/{mine.pk}"))
    ended = browser.post(f"/bus/adapters/{mine.pk}/revoke", {"back": str(mine.pk)}, follow=True)

    assert "python-httpx 0.28.1" in page
    assert "<code>scanner-7</code>" in page
    assert 'data-figure="sessions">1</dd>' in page
    assert ended.redirect_chain == [(f"/bus/adapters/{mine.pk}", 302)]
    assert "1 session of billing ended." in text_of(ended)
    assert not Session.objects.filter(user=mine, revoked_at__isnull=True).exists()
    assert "The adapter is signed in nowhere." in text_of(ended)


def test_its_routes_are_shown_both_ways_with_logins_and_display_names(browser, mine, stranger):
    Route.objects.create(recipient=mine, sender=stranger)
    theirs = AdapterFactory.create(username="crm-9", owner=stranger.owner, display_name="CRM")
    Route.objects.create(recipient=theirs, sender=mine)

    page = text_of(browser.get(f"/bus/adapters/{mine.pk}"))

    assert (
        f'<li data-sender="{stranger.pk}">shop-7 <em class="display-name">Web shop</em> '
        f"<small>#{stranger.pk}</small>"
    ) in page
    assert (
        f'<li data-recipient="{theirs.pk}">crm-9 <em class="display-name">CRM</em> '
        f"<small>#{theirs.pk}</small></li>"
    ) in page


def test_a_route_granted_and_withdrawn_on_the_page_comes_back_to_it(browser, mine, stranger):
    back = {"back": str(mine.pk)}

    granted = browser.post(f"/bus/adapters/{mine.pk}/grant", {"sender": "shop-7", **back})
    route = Route.objects.get()
    withdrawn = browser.post(
        f"/bus/adapters/{mine.pk}/withdraw", {"sender": str(stranger.pk), **back}
    )

    assert granted["Location"] == withdrawn["Location"] == f"/bus/adapters/{mine.pk}"
    assert (route.recipient, route.sender) == (mine, stranger)
    assert not Route.objects.exists()


def test_a_refused_route_shows_the_adapters_page_again_with_the_login_typed(browser, mine):
    page = browser.post(f"/bus/adapters/{mine.pk}/grant", {"sender": "nobody", "back": mine.pk})

    assert page.status_code == 200
    assert page.templates[0].name == "cabinet/adapter.html"
    assert field_error(page, f"id_route_{mine.pk}_sender") == "There is no adapter with this login."
    assert 'value="nobody"' in page.content.decode()


def test_the_same_actions_sent_from_bus_go_back_to_bus(browser, mine, stranger):
    assert browser.post(f"/bus/adapters/{mine.pk}/grant", {"sender": "shop-7"})["Location"] == (
        "/bus"
    )
    assert browser.post(f"/bus/adapters/{mine.pk}/revoke")["Location"] == "/bus"
    assert browser.post("/bus/dead-letters/redrive")["Location"] == "/bus"
    # A "back" that is no adapter's number is no place to go.
    assert browser.post(f"/bus/adapters/{mine.pk}/revoke", {"back": "//evil.example"})[
        "Location"
    ] == ("/bus")


def test_its_webhook_is_set_up_from_the_page_which_shows_the_secret_once(browser, mine):
    set_up = browser.post(
        f"/bus/adapters/{mine.pk}/webhook",
        {"url": "https://hooks.example.com/billing", "back": mine.pk},
    )
    page = browser.get(set_up["Location"])
    again = browser.get(f"/bus/adapters/{mine.pk}")

    assert set_up["Location"] == f"/bus/adapters/{mine.pk}"
    assert Webhook.objects.get(adapter=mine).enabled
    assert 'id="webhook-secret">whsec_' in page.content.decode()
    assert page["Cache-Control"] == "no-store"
    assert "webhook-secret" not in again.content.decode()
    assert 'data-webhook-state="on"' in again.content.decode()


def test_its_topics_are_listed_with_its_subscription_and_grants(browser, person, mine, stranger):
    own = topic_create(owner=person, name="invoices")
    subscription_put(user=person, topic=own, adapter_id=mine.pk, types=["invoice.paid"])
    theirs = topic_create(owner=stranger.owner, name="orders")
    publisher_grant(topic=theirs, adapter_id=mine.pk)
    subscriber_allow(topic=theirs, adapter_id=mine.pk)
    topic_create(owner=person, name="unrelated")

    page = text_of(browser.get(f"/bus/adapters/{mine.pk}"))

    assert 'data-topic="invoices"' in page
    assert 'Subscribed: <span class="types"><code>invoice.paid</code></span>' in page
    assert 'data-topic="orders"' in page
    assert "May publish to it (granted by its owner)." in page
    assert "May subscribe to it (allowed by its owner)." in page
    assert 'data-topic="unrelated"' not in page
    assert Subscription.objects.count() == 1


def test_messages_and_dead_letters_show_ids_types_headers_and_payloads(browser, mine):
    # In jsonb's order of keys (shorter first), which is the order it gives them back in.
    message_id = sent_to(
        mine, {"n": [1, 2], "city": "Zürich"}, type="order.created", headers={"trace": "t-1"}
    )
    letter = dead_letter(mine, {"reason": "bad"}, headers={"x-source": "erp"}, reason="EXPIRED")

    page = browser.get(f"/bus/adapters/{mine.pk}").content.decode()

    assert f"<code>{message_id}</code>" in page
    assert '<div class="letter-type">order.created</div>' in page
    assert "<div><dt>trace</dt><dd>t-1</dd></div>" in page
    pretty = json.dumps({"n": [1, 2], "city": "Zürich"}, indent=2, ensure_ascii=False)
    assert entities.escape(pretty, quote=True) in page
    assert f"<code>{letter.message_id}</code>" in page
    assert "<div><dt>x-source</dt><dd>erp</dd></div>" in page
    assert 'data-reason="EXPIRED">expired unreceived</td>' in page


def test_a_topic_copy_shows_its_publications_payload(browser, person, mine):
    topic = topic_create(owner=person, name="invoices")
    subscription_put(user=person, topic=topic, adapter_id=mine.pk, types=None)
    publisher = AdapterFactory.create(username="erp", owner=person)
    topic_publish(
        publisher=publisher,
        topic_id=topic.pk,
        publication=Publishing(type="invoice.paid", payload={"invoice": 42}, headers={}),
    )
    assert Message.objects.get(recipient=mine).payload is None  # the publication's is shown

    page = browser.get(f"/bus/adapters/{mine.pk}").content.decode()

    assert "{\n  &quot;invoice&quot;: 42\n}" in page


def test_a_payload_is_shown_as_text_never_as_markup(browser, mine):
    hostile = {"html": "</pre><script>alert(1)</script>", "<b>key</b>": "x"}
    sent_to(mine, hostile, headers={"h": "<img src=x onerror=alert(1)>"})
    dead_letter(mine, hostile)

    page = browser.get(f"/bus/adapters/{mine.pk}").content.decode()

    assert "<script>alert(1)</script>" not in page
    assert "<img src=x" not in page
    assert "<b>key</b>" not in page
    assert page.count("&lt;/pre&gt;&lt;script&gt;alert(1)&lt;/script&gt;") == 2
    assert "&lt;img src=x onerror=alert(1)&gt;" in page


def test_a_large_payload_is_cut_at_4_kb_and_says_its_size(browser, mine):
    payload = {"text": "é" * 5000}  # 2 bytes each in UTF-8
    whole = json.dumps(payload, indent=2, ensure_ascii=False).encode()
    sent_to(mine, payload)

    page = browser.get(f"/bus/adapters/{mine.pk}").content.decode()

    shown = re.search(r'<pre class="payload" data-bytes="(\d+)">(.*?)</pre>', page, re.S)
    assert shown is not None
    assert int(shown.group(1)) == len(whole)
    text = entities.unescape(shown.group(2))
    head, rest = text.split('\n<span class="cut">')
    assert head.encode() == whole[: SHOWN_BYTES - 1]  # the character cut in two is left out
    assert rest == f"… ({len(whole)} bytes in all)</span>"


def test_a_small_payload_is_shown_whole(browser, mine):
    sent_to(mine, {"n": 1})

    page = browser.get(f"/bus/adapters/{mine.pk}").content.decode()

    assert '<pre class="payload" data-bytes="12">{\n  &quot;n&quot;: 1\n}</pre>' in page


def test_a_test_message_of_ones_own_waits_in_the_queue(browser, mine):
    sent = browser.post(
        f"/bus/adapters/{mine.pk}/message",
        {"type": "invoice.paid", "payload": '{"invoice": 7, "paid": true}'},
        follow=True,
    )

    message = Message.objects.get(recipient=mine)
    assert sent.redirect_chain == [(f"/bus/adapters/{mine.pk}", 302)]
    assert (message.sender_id, message.type, message.payload) == (
        mine.pk,
        "invoice.paid",
        {"invoice": 7, "paid": True},
    )
    assert f"A test message {message.message_id} is waiting for billing." in text_of(sent)


@pytest.mark.parametrize(
    ("language", "typed", "error"),
    [
        ("en", "{not json", 'This is not JSON. Enter, for example, {"text": "Hello"}.'),
        ("en", "NaN", 'This is not JSON. Enter, for example, {"text": "Hello"}.'),
        # Refused as the API refuses a body (platform_site.parsers.json_strict).
        ("en", '{"a": 1, "a": 2}', 'This is not JSON. Enter, for example, {"text": "Hello"}.'),
        ("en", '"\\u0000"', 'This is not JSON. Enter, for example, {"text": "Hello"}.'),
        ("en", "null", "Enter a payload other than null."),
        ("en", "", "Enter the payload as JSON."),
        ("ru", "{not json", 'Это не JSON. Введите, например, {"text": "Привет"}.'),
    ],
    ids=["broken", "NaN", "a key twice", "NUL", "null", "empty", "broken, in Russian"],
)
def test_a_payload_that_is_no_json_stays_typed_with_its_error_on_the_field(
    browser, mine, language, typed, error
):
    browser.cookies[django_settings.LANGUAGE_COOKIE_NAME] = language

    page = browser.post(
        f"/bus/adapters/{mine.pk}/message", {"type": "invoice.paid", "payload": typed}
    )

    assert page.status_code == 200
    assert field_error(page, "id_payload") == error
    assert f">\n{escape(typed)}</textarea>" in page.content.decode()
    assert 'value="invoice.paid"' in page.content.decode()
    assert not Message.objects.exists()


def test_a_payload_larger_than_the_platform_takes_is_an_error_on_the_field(browser, mine, settings):
    settings.EXCHANGE_MAX_PAYLOAD_BYTES = 1024

    page = browser.post(
        f"/bus/adapters/{mine.pk}/message",
        {"type": "t", "payload": json.dumps({"text": "x" * 2000})},
    )

    assert field_error(page, "id_payload") == (
        "The payload is larger than the platform takes (1024 bytes of JSON)."
    )
    assert not Message.objects.exists()


def test_discarding_one_dead_letter_asks_first_then_deletes_only_it(browser, mine, stranger):
    kept = dead_letter(mine)
    discarded = dead_letter(mine, type="order.lost")
    theirs = dead_letter(stranger)
    path = f"/bus/adapters/{mine.pk}/dead-letters/discard"

    asked = browser.get(path, {"message": str(discarded.message_id)})
    untouched = DeadLetter.objects.count()
    done = browser.post(path, {"message": str(discarded.message_id)}, follow=True)

    assert asked.status_code == 200
    assert "Discard a dead letter of billing?" in text_of(asked)
    assert f"<code>{discarded.message_id}</code>" in asked.content.decode()
    assert "order.lost" in text_of(asked)
    assert untouched == 3  # asking deleted nothing
    assert done.redirect_chain == [(f"/bus/adapters/{mine.pk}", 302)]
    assert "1 dead letter of billing is discarded." in text_of(done)
    assert set(DeadLetter.objects.values_list("pk", flat=True)) == {kept.pk, theirs.pk}


def test_another_adapters_dead_letter_is_not_discarded_by_naming_it(browser, mine, stranger):
    theirs = dead_letter(stranger)

    browser.post(
        f"/bus/adapters/{mine.pk}/dead-letters/discard", {"message": str(theirs.message_id)}
    )

    assert DeadLetter.objects.filter(pk=theirs.pk).exists()


def test_discarding_all_dead_letters_asks_first_in_one_statement_and_is_audited(
    browser, person, mine, stranger
):
    for _n in range(3):
        dead_letter(mine)
    theirs = dead_letter(stranger)
    path = f"/bus/adapters/{mine.pk}/dead-letters/discard"

    asked = browser.get(path)
    with CaptureQueriesContext(connection) as queries:
        done = browser.post(path)

    assert "Discard every dead letter of billing?" in text_of(asked)
    assert "3 dead letters will be deleted." in text_of(asked)
    assert done["Location"] == f"/bus/adapters/{mine.pk}"
    assert list(DeadLetter.objects.values_list("pk", flat=True)) == [theirs.pk]
    deletes = [q["sql"] for q in queries.captured_queries if q["sql"].startswith("DELETE")]
    assert len([sql for sql in deletes if "exchange_deadletter" in sql]) == 1
    event = AuditEvent.objects.get(kind=AuditEvent.Kind.DEAD_LETTERS_DISCARDED)
    assert (event.user, event.actor, event.details) == (mine, person, {"discarded": 3})


def test_selected_dead_letters_are_redriven_from_the_page_and_it_comes_back(browser, mine):
    chosen = dead_letter(mine)
    left = dead_letter(mine)

    done = browser.post(
        "/bus/dead-letters/redrive",
        {"message": [str(chosen.message_id)], "back": str(mine.pk)},
        follow=True,
    )

    assert done.redirect_chain == [(f"/bus/adapters/{mine.pk}", 302)]
    assert "1 message is back in its queue." in text_of(done)
    assert Message.objects.get(recipient=mine).message_id == chosen.message_id
    assert list(DeadLetter.objects.values_list("pk", flat=True)) == [left.pk]


@pytest.mark.parametrize("where", ["the adapter's page", "/bus"])
def test_the_dead_letters_checkboxes_start_unchecked(browser, mine, where):
    dead_letter(mine)

    path = "/bus" if where == "/bus" else f"/bus/adapters/{mine.pk}"
    page = browser.get(path).content.decode()

    boxes = re.findall(r'<input type="checkbox" name="message"[^>]*>', page)
    assert len(boxes) == 1
    assert "checked" not in boxes[0]


def test_deleting_the_adapter_asks_first_saying_what_goes_then_deletes_it(
    browser, person, mine, stranger
):
    sent_to(mine, {"n": 1})
    dead_letter(mine)
    Route.objects.create(recipient=mine, sender=stranger)
    Webhook.objects.create(adapter=mine, url="https://hooks.example.com/b", secret="s")
    topic = topic_create(owner=person, name="invoices")
    subscription_put(user=person, topic=topic, adapter_id=mine.pk, types=None)

    asked = browser.get(f"/bus/adapters/{mine.pk}/delete")
    still_there = User.objects.filter(pk=mine.pk).exists()
    done = browser.post(f"/bus/adapters/{mine.pk}/delete", follow=True)

    asked_text = text_of(asked)
    assert "Delete billing?" in asked_text
    for goes in (
        "its queue: 1 message waiting;",
        "its dead letters: 1;",
        "its routes, to it and from it: 1;",
        "its webhook, with its secret and delivery log;",
        "its subscriptions to topics: 1,",
        "its sessions: 0 active.",
    ):
        assert goes in asked_text, goes
    assert still_there
    assert done.redirect_chain == [("/bus", 302)]
    assert "billing is deleted." in text_of(done)
    assert not User.objects.filter(pk=mine.pk).exists()
    for model in (Message, DeadLetter, Route, Webhook, Subscription):
        assert not model.objects.exists(), model


def test_the_confirmation_pages_opened_from_the_adapters_page_lead_back_to_it(browser, mine):
    for action in ("rotate", "disable", "purge"):
        asked = browser.get(f"/bus/adapters/{mine.pk}/{action}", {"back": mine.pk})
        html = asked.content.decode()
        assert f'<input type="hidden" name="back" value="{mine.pk}">' in html, action
        assert f'<a href="/bus/adapters/{mine.pk}">Cancel</a>' in html, action

    disabled = browser.post(f"/bus/adapters/{mine.pk}/disable", {"back": mine.pk})
    mine.refresh_from_db()

    assert disabled["Location"] == f"/bus/adapters/{mine.pk}"
    assert not mine.is_active


def test_a_new_password_set_from_the_adapters_page_is_shown_there_once(browser, mine):
    rotated = browser.post(f"/bus/adapters/{mine.pk}/rotate", {"back": mine.pk})
    page = browser.get(rotated["Location"])
    password = re.search(r'id="credential-password">([^<]+)</code>', page.content.decode())
    again = browser.get(rotated["Location"])

    assert rotated["Location"] == f"/bus/adapters/{mine.pk}"
    assert password is not None
    mine.refresh_from_db()
    assert mine.check_password(password.group(1))
    assert page["Cache-Control"] == "no-store"
    assert "credential-password" not in again.content.decode()


def test_every_form_of_the_page_posts_with_its_csrf_token(browser, mine):
    dead_letter(mine)
    enforced = Client(enforce_csrf_checks=True)
    enforced.cookies = browser.cookies

    page = enforced.get(f"/bus/adapters/{mine.pk}").content.decode()
    forms = re.findall(r'<form method="post"[^>]*>(.*?)</form>', page, re.S)
    refused = enforced.post(f"/bus/adapters/{mine.pk}/name", {"display_name": "x"})

    assert forms
    assert all('name="csrfmiddlewaretoken"' in form for form in forms)
    assert refused.status_code == 403


def test_a_discard_naming_no_messageid_discards_nothing_rather_than_all(browser, mine):
    dead_letter(mine)

    browser.post(f"/bus/adapters/{mine.pk}/dead-letters/discard", {"message": "not-an-id"})

    assert DeadLetter.objects.count() == 1


def test_the_page_costs_as_many_queries_with_many_messages_as_with_one(
    browser, person, mine, stranger, django_assert_max_num_queries
):
    topic = topic_create(owner=person, name="invoices")
    subscription_put(user=person, topic=topic, adapter_id=mine.pk, types=None)
    Route.objects.create(recipient=mine, sender=stranger)
    sent_to(mine, {"n": 0})
    dead_letter(mine)
    with CaptureQueriesContext(connection) as one:
        browser.get(f"/bus/adapters/{mine.pk}")
    for n in range(1, 10):
        sent_to(mine, {"n": n})
        dead_letter(mine)

    with django_assert_max_num_queries(len(one.captured_queries)):
        browser.get(f"/bus/adapters/{mine.pk}")
