"""The Slack format: an incoming-webhook message, `text` plus Block Kit blocks within Slack's limits.

Limits kept: at most 50 blocks, section text at most 3,000 characters (counted after escaping).
Repo text is escaped as Slack requires (`&` `<` `>` become `&amp;` `&lt;` `&gt;`, which also defuses
`<!channel>`, `<@U…>` and `<url|label>` links), control characters are made visible, every text
object is `verbatim` (no automatic mention or channel parsing), and links do not unfurl.

Answers: Slack's permanent errors (`channel_is_archived`, `no_service`, `invalid_token`, ...) fail the
delivery for good and disable the subscription; any other answer means what it means for every receiver.
"""

from __future__ import annotations

import json
from typing import Any

from feeds.views.dataset_view import dataset_text, dataset_view
from feeds.views.prompt_diff import event_excerpt
from feeds.webhooks.chat_text import fit, units, visible
from feeds.webhooks.formats import Attempt, Links, Reply, WebhookFormat, classify_reply
from storage.models import Event

CONTENT_TYPE = "application/json"
MAX_BLOCKS = 50
MAX_SECTION = 3000
MAX_TEXT = 3000
MAX_SUMMARY = 500
_ESCAPES = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
PERMANENT = frozenset({
    "channel_is_archived", "channel_not_found", "invalid_token", "no_service", "no_service_id",
    "no_team", "team_disabled", "action_prohibited", "posting_to_general_channel_denied",
})

# The message's fields, for the documentation: JSON path ([] an array's items) -> (JSON type, meaning).
FIELDS: dict[str, tuple[str, str]] = {
    "text": ("string", "The event's title: the notification text, and what shows where blocks cannot."),
    "blocks": ("array of objects", f"Block Kit blocks, at most {MAX_BLOCKS}: the title and facts, the change summaries, "
                                   "the rendered prompt diff of a chat template change, a dataset revision's rows and "
                                   "column changes, and the links."),
    "blocks[].type": ("string", "section (a text) or context (a small print line)."),
    "blocks[].text": ("object", "A section's text."),
    "blocks[].text.type": ("string", "Always mrkdwn."),
    "blocks[].text.text": ("string", f"The text, repo text escaped (&, <, >), at most {MAX_SECTION} characters."),
    "blocks[].text.verbatim": ("boolean", "Always true: no automatic mention, channel or link parsing."),
    "blocks[].elements": ("array of objects", "A context block's texts: how many more changes there are, the links."),
    "blocks[].elements[].type": ("string", "Always mrkdwn."),
    "blocks[].elements[].text": ("string", "The text, escaped as a section's."),
    "blocks[].elements[].verbatim": ("boolean", "Always true."),
    "unfurl_links": ("boolean", "Always false: links do not unfurl."),
    "unfurl_media": ("boolean", "Always false."),
}


def escape_char(ch: str) -> str:
    return _ESCAPES.get(ch, ch)


def escape(text: object, limit: int, newlines: bool = False) -> str:
    """Repo text as Slack mrkdwn shows it literally, cut to `limit` characters."""
    return fit(visible(text, newlines), limit, escape_char)


def _mrkdwn(text: str) -> dict[str, Any]:
    return {"type": "mrkdwn", "text": text, "verbatim": True}


def render(event: Event, links: Links) -> bytes:
    return json.dumps(message(event, links), ensure_ascii=True, separators=(",", ":")).encode("ascii")


def message(event: Event, links: Links) -> dict[str, Any]:
    extra = event.payload or {}
    head = [f"*{escape(event.title, 500)}*"]
    meta = f"{escape(event.repo_id, 250)} · severity {escape(event.severity, 20)}"
    if event.sha:
        meta += f" · `{escape(event.sha[:12], 12)}`"
    if event.security:
        meta += " · security-relevant"
    head.append(meta)
    if extra.get("commit_title"):
        head.append(f"Commit: {escape(extra['commit_title'], 1000)}")
    blocks: list[dict[str, Any]] = [{"type": "section", "text": _mrkdwn("\n".join(head))}]

    found = links.for_event(event)
    link_text = " · ".join(
        f"<{url}|{label}>"
        for key, label in (("page", "Revision page"), ("commit", "Commit on the Hub"), ("repo", "Repo on the Hub"))
        if (url := found.get(key))
    )
    summaries = [f"• {escape(s, MAX_SUMMARY)}" for s in extra.get("summaries") or []]
    dataset = dataset_view(extra)  # a dataset revision's (revision.ingested and dataset.* events carry it)
    # keep places for "… more", the prompt diff, the links and a dataset's section
    room = MAX_BLOCKS - len(blocks) - 3 - (dataset is not None)
    sections, shown = _pack(summaries, room)
    blocks += [{"type": "section", "text": _mrkdwn(text)} for text in sections]
    if shown < len(summaries):
        blocks.append({"type": "context", "elements": [_mrkdwn(f"… and {len(summaries) - shown} more change(s)")]})
    if dataset is not None:
        text = escape("\n".join(dataset_text(dataset)), MAX_SECTION - 10, newlines=True)
        blocks.append({"type": "section", "text": _mrkdwn(f"*Data*\n{text}")})
    if excerpt := event_excerpt(extra):
        conversation, diff = excerpt
        code = escape(diff, MAX_SECTION - 200, newlines=True).replace("```", "ˋˋˋ")
        blocks.append({"type": "section", "text": _mrkdwn(f"Rendered prompt, sample {escape(conversation, 60)}:\n```{code}```")})
    blocks.append({"type": "context", "elements": [_mrkdwn(link_text)]})
    return {
        "text": escape(event.title, MAX_TEXT),
        "blocks": blocks,
        "unfurl_links": False,
        "unfurl_media": False,
    }


def _pack(lines: list[str], max_sections: int) -> tuple[list[str], int]:
    """Lines joined into at most `max_sections` texts of at most MAX_SECTION characters each."""
    sections: list[str] = []
    current: list[str] = []
    size = 0
    shown = 0
    for line in lines:
        extra = units(line) + (1 if current else 0)
        if current and size + extra > MAX_SECTION:
            sections.append("\n".join(current))
            current, size = [], 0
            extra = units(line)
            if len(sections) == max_sections:
                return sections, shown
        current.append(line)
        size += extra
        shown += 1
    if current and len(sections) < max_sections:
        sections.append("\n".join(current))
    return sections, shown


def classify(reply: Reply) -> Attempt:
    """A permanent Slack error ends the subscription; any other answer is classified as for every receiver."""
    if reply.refused and reply.text in PERMANENT:
        return Attempt("failed", reply.status_code, f"Slack: {reply.text}", disable_reason=f"Slack answered {reply.text}")
    return classify_reply(reply)


FORMAT = WebhookFormat("slack", render=render, classify=classify, content_type=CONTENT_TYPE)
