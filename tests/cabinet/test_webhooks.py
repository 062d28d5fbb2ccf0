"""The webhook section of /bus's adapter cards (exchange/web/webhooks.py) with Django's test
client: setting one up and its secret shown once, a refused URL on its field, turning it off and
on, rotating the secret, a test event, deleting after a confirmation, the delivery log, another
owner's adapter, and the Russian of it."""

from __future__ import annotations

import ast
import html
import inspect
import re
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import translation

from accounts.factor_secrets import secret_decrypt
from accounts.models import User
from exchange.models import Message, Webhook, WebhookAttempt
from exchange.web.webhook_cards import LOG_SHOWN, URL_PROBLEMS, url_problem_sentence
from exchange.webhooks import targets
from tests.factories import AdapterFactory

pytestmark = pytest.mark.django_db

HOOK = "https://hooks.example.com/billing"
NONE = "\N{EN DASH}"  # what an empty cell shows


def text(response: Any) -> str:
    return re.sub(r"\s+", " ", response.content.decode())


def section(page: Any, adapter: User) -> str:
    """The webhook section of ``adapter``'s card."""
    found = re.search(
        rf'<section class="webhook" id="webhook-{adapter.pk}".*?</section>', text(page)
    )
    assert found is not None, text(page)
    return found.group(0)


def flashed(page: Any) -> list[str]:
    return [
        re.sub(r"<[^>]+>", "", message).strip()
        for message in re.findall(r'<li class="message [^"]*">(.*?)</li>', text(page))
    ]


def shown_secret(page: Any) -> str | None:
    found = re.search(r'<code id="webhook-secret">([^<]+)</code>', text(page))
    return found.group(1) if found else None


def stored_secret(adapter: User) -> str:
    webhook = Webhook.objects.get(adapter=adapter)
    return secret_decrypt(user_id=adapter.pk, stored=webhook.secret, purpose="webhook")


def set_up(browser: Client, adapter: User, url: str = HOOK) -> Any:
    return browser.post(f"/bus/adapters/{adapter.pk}/webhook", {"url": url})


def test_an_adapter_without_a_webhook_offers_to_set_one_up(browser, mine):
    shown = section(browser.get("/bus"), mine)

    assert 'data-webhook-state="none"' in shown
    assert f'<form method="post" action="/bus/adapters/{mine.pk}/webhook" novalidate>' in shown
    assert f'<label for="id_webhook_{mine.pk}_url">Webhook URL</label>' in shown
    assert "Set up a webhook</button>" in shown


def test_setting_up_a_webhook_turns_it_on_and_shows_its_secret_once(browser, mine):
    answered = set_up(browser, mine)
    first = browser.get("/bus")
    again = browser.get("/bus")

    assert answered.status_code == 302
    assert answered["Location"] == "/bus"
    webhook = Webhook.objects.get(adapter=mine)
    assert (webhook.url, webhook.enabled) == (HOOK, True)
    secret = shown_secret(first)
    assert secret is not None
    assert secret.startswith("whsec_")
    assert secret == stored_secret(mine)
    assert "Webhook secret of billing" in text(first)
    assert (
        "Store the secret now where the endpoint checks the signatures: it is shown only this once."
        in text(first)
    )
    assert first["Cache-Control"] == "no-store"
    assert flashed(first) == [f"The messages of billing are now pushed to {HOOK}."]
    assert shown_secret(again) is None
    assert secret not in text(again)
    assert 'data-webhook-state="on"' in section(again, mine)
    assert f"<code>{HOOK}</code>" in section(again, mine)


def test_a_refused_url_is_told_on_its_field_and_stays_typed(browser, mine, settings):
    settings.EXCHANGE_WEBHOOK_ALLOW_PRIVATE = False
    refused = {
        "http://hooks.example.com/billing": "Enter a URL that begins with https://.",
        "https://user:pw@hooks.example.com/": "Leave the user name and password out of the "
        "URL: the endpoint checks each request's signature instead.",
        "https://10.0.0.7/hook": "This address is private, loopback, link-local or multicast: "
        "a webhook reaches only public addresses.",
        "https:///no-host": "Enter a valid URL.",
        "https://-billing.example.com/": "Enter a valid host name.",
        "https://пример.рф/": "Write the URL in ASCII: a name in punycode (xn--…), the path "
        "percent-encoded.",
        "": "This field is required.",
    }

    for url, sentence in refused.items():
        page = set_up(browser, mine, url)

        assert page.status_code == 200, url
        shown = section(page, mine)
        error = re.search(
            rf'<p class="error" id="id_webhook_{mine.pk}_url_error">([^<]*)</p>', shown
        )
        assert error is not None, url
        assert html.unescape(error.group(1)).strip() == sentence
        assert re.search(rf'<input[^>]*name="url"[^>]*value="{re.escape(url)}"', shown) or not url
        assert "Some fields are invalid" not in text(page)
    assert not Webhook.objects.exists()


def literal_messages(value: ast.expr) -> set[str]:
    """The strings a return statement's value may be: a literal, or either branch of an if."""
    if isinstance(value, ast.Constant) and isinstance(value.value, str):
        return {value.value}
    if isinstance(value, ast.IfExp):
        return literal_messages(value.body) | literal_messages(value.orelse)
    return set()


def test_every_problem_the_url_check_names_has_a_sentence():
    # The service's messages are the API's English: each has a sentence of the page's language,
    # and a new one fails here rather than reaching a Russian page in English.
    returns = [
        node.value
        for node in ast.walk(ast.parse(inspect.getsource(targets.url_problem)))
        if isinstance(node, ast.Return) and node.value is not None
    ]
    named = {message for value in returns for message in literal_messages(value)}
    too_long = targets.url_problem("https://" + "a" * targets.MAX_URL_LENGTH, allow_private=False)

    assert len(named) >= 6  # the walk finds them
    assert named | {too_long} <= set(URL_PROBLEMS)
    with translation.override("ru"):
        for problem in URL_PROBLEMS:
            assert url_problem_sentence(problem) != problem, problem


def test_a_refused_url_is_told_in_russian(browser, mine, settings):
    settings.EXCHANGE_WEBHOOK_ALLOW_PRIVATE = False
    browser.cookies[settings.LANGUAGE_COOKIE_NAME] = "ru"

    page = set_up(browser, mine, "http://hooks.example.com/billing")

    assert "Введите URL, начинающийся с https://." in section(page, mine)  # noqa: RUF001


def test_changing_the_url_keeps_the_webhook_off_or_on_as_it_was(browser, mine):
    set_up(browser, mine)
    browser.post(f"/bus/adapters/{mine.pk}/webhook/disable")
    browser.get("/bus")

    answered = browser.post(f"/bus/adapters/{mine.pk}/webhook", {"url": HOOK + "/v2"})
    page = browser.get("/bus")

    webhook = Webhook.objects.get(adapter=mine)
    assert answered["Location"] == "/bus"
    assert (webhook.url, webhook.enabled) == (HOOK + "/v2", False)
    assert flashed(page) == [f"The webhook of billing now points to {HOOK}/v2."]
    assert shown_secret(page) is None
    assert re.search(rf'name="url"[^>]*value="{re.escape(HOOK)}/v2"', section(page, mine))


def test_a_refused_new_url_opens_its_form_and_changes_nothing(browser, mine, settings):
    settings.EXCHANGE_WEBHOOK_ALLOW_PRIVATE = False
    set_up(browser, mine)

    page = browser.post(f"/bus/adapters/{mine.pk}/webhook", {"url": "ftp://hooks.example.com/"})

    shown = section(page, mine)
    assert "<details open> <summary>Change the URL</summary>" in shown
    assert (
        f'id="id_webhook_{mine.pk}_url_error">Enter a URL that begins with https://. </p>' in shown
    )
    assert 'value="ftp://hooks.example.com/"' in shown
    assert Webhook.objects.get(adapter=mine).url == HOOK


def test_the_webhook_is_turned_off_and_on_again(browser, mine):
    set_up(browser, mine)
    browser.get("/bus")

    browser.post(f"/bus/adapters/{mine.pk}/webhook/disable")
    off = browser.get("/bus")
    enabled_when_off = Webhook.objects.get(adapter=mine).enabled
    browser.post(f"/bus/adapters/{mine.pk}/webhook/enable")
    on = browser.get("/bus")

    assert enabled_when_off is False
    assert 'data-webhook-state="off"' in section(off, mine)
    assert "Turned off by you." in section(off, mine)
    assert "Turn the webhook on</button>" in section(off, mine)
    assert flashed(off) == [
        "The webhook of billing is off: the adapter receives its messages over the API again."
    ]
    assert Webhook.objects.get(adapter=mine).enabled is True
    assert "Turn the webhook off</button>" in section(on, mine)
    assert flashed(on) == ["The webhook of billing is on: its messages are pushed to it."]


@pytest.mark.parametrize(
    ("reason", "sentence"),
    [
        ("GONE", "Turned off by the platform: the endpoint answered 410 Gone."),
        ("FAILING", "Turned off by the platform: the endpoint failed for days without a success."),
    ],
)
def test_a_webhook_the_platform_turned_off_says_why_and_opens_its_log(
    browser, mine, reason, sentence
):
    set_up(browser, mine)
    Webhook.objects.filter(adapter=mine).update(enabled=False, disabled_reason=reason)

    shown = section(browser.get("/bus"), mine)
    browser.post(f"/bus/adapters/{mine.pk}/webhook/enable")

    assert f'data-webhook-state="{reason}"' in shown
    assert sentence in shown
    assert '<details class="webhook-log" open>' in shown
    assert Webhook.objects.get(adapter=mine).disabled_reason is None


def test_rotating_the_secret_shows_the_new_one_once_and_until_when_the_old_one_signs(
    browser, mine, settings
):
    settings.EXCHANGE_WEBHOOK_SECRET_OVERLAP_SECONDS = 86400
    set_up(browser, mine)
    first = shown_secret(browser.get("/bus"))

    answered = browser.post(f"/bus/adapters/{mine.pk}/webhook/rotate")
    page = browser.get("/bus")

    assert answered["Location"] == "/bus"
    second = shown_secret(page)
    assert second is not None
    assert second not in (first, None)
    assert second == stored_secret(mine)
    until = Webhook.objects.get(adapter=mine).previous_secret_until
    assert until is not None
    assert (
        f"Until {until.astimezone(UTC):%Y-%m-%d %H:%M} UTC each request is signed with this "
        "secret and with the previous one" in text(page)
    )
    assert shown_secret(browser.get("/bus")) is None


def test_a_test_event_is_queued_and_named_by_its_message_id(browser, mine):
    set_up(browser, mine)

    answered = browser.post(f"/bus/adapters/{mine.pk}/webhook/test")
    page = browser.get("/bus")

    assert answered["Location"] == "/bus"
    [event] = Message.objects.filter(recipient=mine, type="webhook.test")
    assert flashed(page)[-1] == (
        f"A test event {event.message_id} is queued for the webhook of billing."
    )


def test_a_test_event_for_a_webhook_turned_off_asks_to_turn_it_on(browser, mine):
    set_up(browser, mine)
    browser.post(f"/bus/adapters/{mine.pk}/webhook/disable")
    browser.get("/bus")

    browser.post(f"/bus/adapters/{mine.pk}/webhook/test")

    assert flashed(browser.get("/bus")) == [
        "The webhook is turned off: turn it on to send it a test event."
    ]
    assert not Message.objects.filter(type="webhook.test").exists()


def test_deleting_asks_first_and_deletes_only_on_the_confirmation(browser, mine):
    set_up(browser, mine)
    bus = section(browser.get("/bus"), mine)

    asked = browser.get(f"/bus/adapters/{mine.pk}/webhook/delete")
    kept = Webhook.objects.filter(adapter=mine).exists()
    done = browser.post(f"/bus/adapters/{mine.pk}/webhook/delete")
    page = browser.get("/bus")

    assert f'<form method="get" action="/bus/adapters/{mine.pk}/webhook/delete">' in bus
    assert f'<form method="post" action="/bus/adapters/{mine.pk}/webhook/delete">' not in bus
    assert asked.status_code == 200
    assert "<h1>Delete the webhook of billing?</h1>" in text(asked)
    assert f"<code>{HOOK}</code>" in text(asked)
    assert '<button type="submit" class="danger">Delete the webhook</button>' in text(asked)
    assert kept
    assert done["Location"] == "/bus"
    assert not Webhook.objects.filter(adapter=mine).exists()
    assert flashed(page) == [
        "The webhook of billing is deleted: the adapter receives its messages over the API again."
    ]
    assert 'data-webhook-state="none"' in section(page, mine)


def test_an_action_on_no_webhook_says_there_is_none(browser, mine):
    for action in ("rotate", "test", "enable", "disable", "delete"):
        browser.post(f"/bus/adapters/{mine.pk}/webhook/{action}")
        assert flashed(browser.get("/bus")) == ["This adapter has no webhook."], action
    asked = browser.get(f"/bus/adapters/{mine.pk}/webhook/delete")
    assert asked["Location"] == "/bus"


def test_another_owners_adapter_is_not_found(browser, adapter):
    answers = [
        set_up(browser, adapter),
        *(
            browser.post(f"/bus/adapters/{adapter.pk}/webhook/{action}")
            for action in ("enable", "disable", "rotate", "test", "delete")
        ),
        browser.get(f"/bus/adapters/{adapter.pk}/webhook/delete"),
    ]

    assert [answer.status_code for answer in answers] == [404] * 7
    assert not Webhook.objects.exists()


def test_other_methods_and_actions_are_refused(browser, mine):
    set_up(browser, mine)

    assert browser.get(f"/bus/adapters/{mine.pk}/webhook/rotate").status_code == 405
    assert browser.get(f"/bus/adapters/{mine.pk}/webhook").status_code == 405
    assert browser.post(f"/bus/adapters/{mine.pk}/webhook/purge").status_code == 404


def attempt(adapter: User, n: int, **fields: Any) -> WebhookAttempt:
    values: dict[str, Any] = {
        "message_id": uuid.uuid4(),
        "attempt": 1,
        "at": datetime(2026, 11, 24, 20, 0, tzinfo=UTC) + timedelta(minutes=n),
        "status": 200,
        "outcome": "delivered",
        "latency_ms": 40 + n,
        "error": "",
    }
    return WebhookAttempt.objects.create(adapter=adapter, **{**values, **fields})


def log_rows(shown: str) -> list[list[str]]:
    body = re.search(r'<table class="log">.*?<tbody>(.*?)</tbody>', shown)
    assert body is not None, shown
    return [
        [re.sub(r"<[^>]+>", "", cell).strip() for cell in re.findall(r"<td[^>]*>(.*?)</td>", row)]
        for row in re.findall(r"<tr[^>]*>(.*?)</tr>", body.group(1))
    ]


def test_the_delivery_log_shows_the_last_attempts_newest_first(browser, mine):
    set_up(browser, mine)
    for n in range(LOG_SHOWN + 4):
        attempt(mine, n)
    failed = attempt(
        mine, 60, attempt=3, status=503, outcome="failed", latency_ms=812, error="HTTP 503: busy"
    )
    timeout = attempt(
        mine,
        61,
        attempt=4,
        status=None,
        outcome="timeout",
        latency_ms=15000,
        error="No answer within 15 s",
    )
    refused = attempt(
        mine, 62, status=None, outcome="refused", latency_ms=3, error="Connection refused"
    )

    shown = section(browser.get("/bus"), mine)
    rows = log_rows(shown)

    assert len(rows) == LOG_SHOWN
    assert rows[:3] == [
        [
            "2026-11-24 21:02 UTC",
            str(refused.message_id),
            "1",
            NONE,
            "connection refused",
            "3 ms",
            "Connection refused",
        ],
        [
            "2026-11-24 21:01 UTC",
            str(timeout.message_id),
            "4",
            NONE,
            "timed out",
            "15000 ms",
            "No answer within 15 s",
        ],
        [
            "2026-11-24 21:00 UTC",
            str(failed.message_id),
            "3",
            "503",
            "failed",
            "812 ms",
            "HTTP 503: busy",
        ],
    ]
    assert rows[3][3:] == ["200", "delivered", f"{40 + LOG_SHOWN + 3} ms", NONE]
    assert '<th scope="col">Error</th>' in shown
    assert ' style="' not in shown


def test_a_webhook_without_deliveries_says_so(browser, mine):
    set_up(browser, mine)

    assert '<p class="empty">No deliveries yet.</p>' in section(browser.get("/bus"), mine)


def test_the_webhooks_of_more_adapters_cost_no_more_queries(browser, person):
    def queries_of_bus() -> int:
        with CaptureQueriesContext(connection) as run:
            assert browser.get("/bus").status_code == 200
        return len(run.captured_queries)

    first = AdapterFactory.create(owner=person)
    set_up(browser, first)
    attempt(first, 1)
    browser.get("/bus")  # the secret, shown once
    one = queries_of_bus()
    for _ in range(3):
        more = AdapterFactory.create(owner=person)
        set_up(browser, more)
        attempt(more, 1)
    browser.get("/bus")

    assert queries_of_bus() == one


def test_the_webhook_section_speaks_russian(browser, mine, settings):
    set_up(browser, mine)
    attempt(mine, 1, outcome="timeout", status=None)
    browser.cookies[settings.LANGUAGE_COOKIE_NAME] = "ru"

    page = browser.get("/bus")
    shown = section(page, mine)

    assert "Секрет вебхука billing" in text(page)
    assert "Вебхук" in shown
    assert "Отправить тестовое событие</button>" in shown
    assert "нет ответа" in shown
    assert "Webhook" not in shown
