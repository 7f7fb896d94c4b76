"""Slack and Discord messages stay within the services' limits and show hostile repo text literally."""

from __future__ import annotations

import json
import re

import pytest

from feeds.webhooks import discord, generic, slack
from feeds.webhooks.chat_text import units, visible
from storage.models import Event
from tests.support.clock import T0
from tests.support.webhooks import LINKS

HOSTILE = (
    "<script>alert('x')</script> <b>bold</b> & <!channel> <!here> <@U0123> <#C0123> <https://evil.example|click> "
    "@everyone @here <@&1234> [click](https://evil.example) **bold** # heading > quote `code` ~~strike~~ "
    "\x1b[31mred\x1b[0m \x00nul \x07bell \x7fdel \u202ereversed\u202c zero\u200bwidth 😀 \r\n second line"
)
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f\u202a-\u202e\u2066-\u2069\u200b-\u200d]")


def _event(title: str = HOSTILE, commit_title: str = HOSTILE, summaries: int = 3, severity: str = "critical") -> Event:
    return Event(
        seq=7, event_id="ev-1", kind="revision.ingested", repo_id="org/model", sha="c" * 40, title=title,
        severity=severity, security=True, created_at=T0,
        payload={"commit_title": commit_title, "kinds": ["chat_template"],
                 "summaries": [f"{i}: {HOSTILE}" for i in range(summaries)]},
    )


def _texts(value: object) -> list[str]:
    """Every string in a JSON document."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _texts(v)]
    if isinstance(value, list):
        return [t for v in value for t in _texts(v)]
    return []


@pytest.mark.parametrize("summaries", [0, 3, 2000])
def test_slack_messages_keep_slacks_limits(summaries: int) -> None:
    """At most 50 blocks, section texts and the fallback text at most 3,000 characters, however many changes."""
    body = slack.render(_event(HOSTILE * 40, HOSTILE * 40, summaries), LINKS)
    message = json.loads(body)
    assert len(message["blocks"]) <= slack.MAX_BLOCKS
    assert units(message["text"]) <= 3000
    for block in message["blocks"]:
        texts = [block["text"]] if "text" in block else block["elements"]
        for text in texts:
            assert text["type"] == "mrkdwn" and text["verbatim"] is True
            assert units(text["text"]) <= 3000
    if summaries == 2000:
        assert "more change(s)" in body.decode()
    assert message["unfurl_links"] is False and message["unfurl_media"] is False


def test_slack_escapes_hostile_text() -> None:
    """&, < and > are escaped (no tags, links or @channel/@user mentions survive); controls are visible."""
    message = json.loads(slack.render(_event(summaries=1), LINKS))
    texts = [message["text"]] + [b["text"]["text"] for b in message["blocks"] if "text" in b]
    for text in texts:
        assert "<" not in text and ">" not in text and not CONTROL.search(text)
        assert "&amp;" in text and "&lt;script&gt;" in text and "&lt;!channel&gt;" in text
    assert "\u241b[31mred" in texts[0]  # ESC shown as the ␛ control picture
    links = message["blocks"][-1]["elements"][0]["text"]
    assert links.startswith("<https://hubwatch.example/repos/org/model/revisions/") and "|Revision page>" in links


@pytest.mark.parametrize("summaries", [0, 3, 2000])
def test_discord_messages_keep_discords_limits(summaries: int) -> None:
    """content at most 2,000, at most 10 embeds, 6,000 embed characters, and the per-field limits."""
    message = json.loads(discord.render(_event(HOSTILE * 40, HOSTILE * 40, summaries), LINKS))
    assert units(message["content"]) <= 2000
    assert 1 <= len(message["embeds"]) <= 10
    assert sum(discord.embed_units(e) for e in message["embeds"]) <= 6000
    for embed in message["embeds"]:
        assert units(embed["title"]) <= 256 and units(embed["description"]) <= 4096
        assert len(embed["fields"]) <= 25
        assert all(units(f["name"]) <= 256 and units(f["value"]) <= 1024 for f in embed["fields"])
    assert message["allowed_mentions"] == {"parse": []}


def test_discord_escapes_hostile_text() -> None:
    """Markdown and mentions show literally: no live @everyone, <@id>, [link](url) or headings; controls visible."""
    message = json.loads(discord.render(_event(summaries=1), LINKS))
    embed = message["embeds"][0]
    texts = [message["content"], embed["title"], embed["description"]]
    for text in texts:
        assert "@everyone" not in text and "@here" not in text and "@\u200beveryone" in text
        assert not re.search(r"(?<!\\)[<\[\]()*_~`#>|]", text), text
        assert not CONTROL.search(text.replace("@\u200b", "@"))
        assert "\\<script\\>" in text
    assert embed["url"].startswith("https://hubwatch.example/repos/org/model/revisions/")
    assert embed["color"] == discord._COLORS["critical"]


def test_generic_body_keeps_the_data_exact_and_ascii() -> None:
    """The generic body is ASCII JSON that decodes back to exactly what was stored, hostile or not."""
    event = _event(summaries=2)
    event.payload["commit_title"] = HOSTILE + "\ud800"  # a lone surrogate, as JSON can carry
    body = generic.render(event, LINKS)
    assert body.isascii()
    data = json.loads(body)["data"]
    assert data["commit_title"] == HOSTILE + "\ud800" and data["title"] == HOSTILE


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("plain", "plain"),
        ("a\x1bb", "a\u241bb"),
        ("tab\there", "tab here"),
        ("line\r\nnext", "line\nnext"),
        ("\u202eevil", "\ufffdevil"),
        ("\x00", "\u2400"),
        ("\x7f", "\u2421"),
    ],
)
def test_control_characters_become_visible(text: str, shown: str) -> None:
    """Controls become U+2400 pictures, bidi and invisible format characters U+FFFD; newlines stay."""
    assert visible(text) == shown


def _prompt_event(before: str, after: str) -> Event:
    event = _event(summaries=1)
    event.payload["prompt"] = {"template": "tokenizer_config.json", "conversation": "tool_call_round_trip",
                               "before": before, "after": after}
    return event


BEFORE = "<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\n"
AFTER = "<|start_header_id|>system<|end_header_id|>\n\nEnvironment: ipython\nCutting Knowledge Date: December 2023\n"


def test_slack_shows_the_rendered_prompt_diff() -> None:
    """A chat-template event's changed prompt appears as a short diff, escaped, inside a code block."""
    message = json.loads(slack.render(_prompt_event(BEFORE, AFTER), LINKS))
    (section,) = [b["text"]["text"] for b in message["blocks"] if "Rendered prompt" in b.get("text", {}).get("text", "")]
    assert "sample tool_call_round_trip" in section and "+ Environment:" in section
    assert "<|" not in section and "&lt;|start_header_id|&gt;" not in section.split("```")[0]


def test_discord_shows_the_rendered_prompt_diff() -> None:
    """Discord gets the same short diff as a field, escaped, within the field limits."""
    message = json.loads(discord.render(_prompt_event(BEFORE, AFTER), LINKS))
    (field,) = [f for f in message["embeds"][0]["fields"] if f["name"].startswith("Rendered prompt")]
    assert field["value"].startswith("+ Environment") and "ipython" in field["value"] and units(field["value"]) <= 1024


@pytest.mark.parametrize("render", [slack.render, discord.render])
def test_a_huge_hostile_prompt_keeps_the_limits(render) -> None:
    """Prompts of hostile text thousands of lines long still fit the services' limits and stay escaped."""
    message = json.loads(render(_prompt_event(HOSTILE * 2 + "\n" * 3, (HOSTILE + "\n") * 500), LINKS))
    texts = _texts(message)
    assert not any("<!channel>" in t or "<script>" in t for t in texts)
    if "blocks" in message:
        assert all(units(b["text"]["text"]) <= 3000 for b in message["blocks"] if "text" in b)
    else:
        assert sum(discord.embed_units(e) for e in message["embeds"]) <= 6000
        assert all(units(f["value"]) <= 1024 for e in message["embeds"] for f in e["fields"])
