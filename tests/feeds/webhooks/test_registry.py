"""One WebhookFormat per format, found by name in one registry: its secret and URL rules agree with the
shared vocabulary, and each classifies a receiver's answer as its service means it."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from feeds.webhooks import FORMATS, webhook_format
from feeds.webhooks.formats import Reply
from storage import kinds
from storage.errors import InvalidSubscription

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


def test_the_registry_holds_one_object_per_format_under_its_name():
    """Every format of the vocabulary has its object, under its own name, and no other is registered."""
    assert tuple(FORMATS) == kinds.WEBHOOK_FORMATS
    assert all(fmt.name == name for name, fmt in FORMATS.items())


@pytest.mark.parametrize(
    ("name", "posted", "needs_secret", "takes_secret", "sends_itself"),
    [
        ("generic", True, True, True, False),
        ("slack", True, False, True, False),
        ("discord", True, False, True, False),
        ("apprise", False, False, False, True),
    ],
)
def test_each_format_says_how_it_is_sent_and_signed(name, posted, needs_secret, takes_secret, sends_itself):
    """Only generic needs a secret; Apprise URLs take none and Apprise sends them itself."""
    fmt = webhook_format(name)
    assert (fmt.posted, fmt.needs_secret, fmt.takes_secret, fmt.send is not None) == (
        posted, needs_secret, takes_secret, sends_itself
    )


def test_an_unknown_format_is_refused_with_the_known_ones():
    """Looking up a format nobody registered names the formats there are."""
    with pytest.raises(InvalidSubscription, match="generic, slack, discord, apprise, got 'teams'"):
        webhook_format("teams")


@pytest.mark.parametrize(
    ("name", "url", "full", "shown"),
    [
        ("slack", "https://hooks.slack.com/services/T0/B0/token", False, "https://hooks.slack.com/…"),
        ("slack", "https://hooks.slack.com/services/T0/B0/token", True, "https://hooks.slack.com/services/T0/B0/token"),
        ("apprise", "tgram://123456:bot-token/4242/", True, "tgram://…"),  # credentials: never shown whole
        ("apprise", "ntfys://user:pass@ntfy.example.com/topic", False, "ntfys://ntfy.example.com/…"),
    ],
)
def test_urls_are_shown_as_the_format_allows(name, url, full, shown):
    """Listings redact every URL; the answer that created it shows it whole, unless it holds credentials."""
    assert webhook_format(name).shown_url(url, full) == shown


@pytest.mark.parametrize(
    ("name", "status", "headers", "body", "outcome", "wait_s", "disabled"),
    [
        ("generic", 204, {}, "", "delivered", None, False),
        ("generic", 410, {}, "", "failed", None, True),
        ("generic", 503, {"retry-after": "45"}, "", "retry", 45.0, False),
        ("generic", 429, {"retry-after": "Sun, 01 Mar 2026 12:01:30 GMT"}, "", "retry", 90.0, False),  # an HTTP date
        ("generic", 500, {}, "", "retry", None, False),
        ("generic", 302, {"location": "https://elsewhere.example/x"}, "", "retry", None, False),
        ("generic", 400, {}, "bad", "retry", None, False),
        ("slack", 404, {}, "channel_is_archived", "failed", None, True),  # a permanent Slack error
        ("slack", 500, {}, "channel_is_archived", "retry", None, False),  # a 5xx is the endpoint being down
        ("slack", 400, {}, "invalid_payload", "retry", None, False),
        ("discord", 404, {}, '{"message": "Unknown Webhook", "code": 10015}', "failed", None, True),
        ("discord", 400, {}, '{"message": "Unknown Webhook", "code": 10015}', "retry", None, False),  # only 401/404
        ("discord", 429, {}, '{"retry_after": 2.5, "global": false}', "retry", 2.5, False),  # the wait in the body
        ("discord", 429, {"retry-after": "7"}, '{"retry_after": 2.5}', "retry", 7.0, False),  # the header first
        ("generic", 429, {}, '{"retry_after": 2.5}', "retry", None, False),  # only Discord's body says a wait
    ],
)
def test_each_format_classifies_answers_as_its_service_means_them(name, status, headers, body, outcome, wait_s, disabled):
    """Success, retries with their Retry-After (seconds or date, or Discord's body), and permanent errors per format."""
    attempt = webhook_format(name).classify(Reply(status, headers, body, NOW))
    assert (attempt.outcome, attempt.status_code, attempt.retry_after_s, attempt.disable_reason is not None) == (
        outcome, status, wait_s, disabled
    )
