"""The Discord format: a webhook message with one embed, within Discord's limits.

Limits kept: `content` at most 2,000 characters, at most 10 embeds and 6,000 characters across
them (title 256, description 4,096, field values 1,024). Repo text has its markdown escaped with
backslashes (so `[x](url)`, `**`, `# heading` and `<@id>` show literally), `@` is followed by a
zero-width space (`@everyone` cannot ping), control characters are made visible, and
`allowed_mentions: {"parse": []}` tells Discord to ping no one whatever the text says.

Answers: a 401 or 404 naming an unknown webhook or a bad token fails the delivery for good and disables
the subscription; a rate limit without `Retry-After` says its wait in the JSON body (`retry_after`,
seconds); any other answer means what it means for every receiver.
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
MAX_CONTENT = 2000
MAX_EMBEDS = 10
MAX_EMBED_TOTAL = 6000
MAX_TITLE = 256
MAX_DESCRIPTION = 4096
MAX_FIELD_NAME = 256
MAX_FIELD_VALUE = 1024
MAX_FOOTER = 2048
MAX_SUMMARY = 400
_MARKDOWN = set("\\*_~`|>#-[]()<:")
PERMANENT = frozenset({10015, 50027})  # Unknown Webhook, Invalid Webhook Token
_COLORS = {"info": 0x95A5A6, "notice": 0x3498DB, "warning": 0xF39C12, "critical": 0xE74C3C}

# The message's fields, for the documentation: JSON path ([] an array's items) -> (JSON type, meaning).
FIELDS: dict[str, tuple[str, str]] = {
    "content": ("string", f"The event's title, at most {MAX_CONTENT} characters."),
    "embeds": ("array of objects", "One embed."),
    "embeds[].title": ("string", f"The event's title, at most {MAX_TITLE} characters."),
    "embeds[].url": ("string", "The revision's page on this server, else the commit on the Hub, else the repo."),
    "embeds[].color": ("integer", "The severity's colour (RGB)."),
    "embeds[].description": ("string", "The commit title and the change summaries (with how many more there are)."),
    "embeds[].fields": ("array of objects", "Repo, Severity, Commit, the rendered prompt diff of a chat template change "
                                                       "and a dataset revision's Data (rows and column changes)."),
    "embeds[].fields[].name": ("string", "The field's label."),
    "embeds[].fields[].value": ("string", f"Its text, markdown escaped, at most {MAX_FIELD_VALUE} characters."),
    "embeds[].fields[].inline": ("boolean", "Whether Discord shows it beside the others."),
    "embeds[].footer": ("object", "The footer."),
    "embeds[].footer.text": ("string", "hubwatch and the event kind."),
    "embeds[].timestamp": ("string", "When the event happened (ISO 8601)."),
    "allowed_mentions": ("object", "Who may be pinged."),
    "allowed_mentions.parse": ("array of strings", "Always empty: no one is pinged, whatever the text says."),
}


def escape_char(ch: str) -> str:
    if ch in _MARKDOWN:
        return "\\" + ch
    if ch == "@":
        return "@\u200b"
    return ch


def escape(text: object, limit: int, newlines: bool = False) -> str:
    """Repo text as Discord shows it literally, cut to `limit` characters."""
    return fit(visible(text, newlines), limit, escape_char)


def render(event: Event, links: Links) -> bytes:
    return json.dumps(message(event, links), ensure_ascii=True, separators=(",", ":")).encode("ascii")


def message(event: Event, links: Links) -> dict[str, Any]:
    extra = event.payload or {}
    severity = escape(event.severity, 20) + (" · security-relevant" if event.security else "")
    fields = [
        {"name": "Repo", "value": escape(event.repo_id, MAX_FIELD_VALUE), "inline": True},
        {"name": "Severity", "value": severity, "inline": True},
    ]
    if event.sha:
        fields.append({"name": "Commit", "value": escape(event.sha[:12], 12), "inline": True})
    if (dataset := dataset_view(extra)) is not None:  # a dataset revision's (revision.ingested and dataset.*)
        fields.append({"name": "Data", "value": escape("\n".join(dataset_text(dataset)), MAX_FIELD_VALUE, newlines=True),
                       "inline": False})
    if excerpt := event_excerpt(extra):
        conversation, diff = excerpt
        fields.append({"name": escape(f"Rendered prompt, sample {conversation}", MAX_FIELD_NAME),
                       "value": escape(diff, MAX_FIELD_VALUE, newlines=True), "inline": False})
    embed: dict[str, Any] = {
        "title": escape(event.title, MAX_TITLE),
        "url": links.primary(event),
        "color": _COLORS.get(event.severity, _COLORS["info"]),
        "fields": fields,
        "footer": {"text": escape(f"hubwatch · {event.kind}", MAX_FOOTER)},
        "timestamp": event.created_at.isoformat(),
    }
    used = embed_units(embed)
    embed["description"] = _description(extra, min(MAX_DESCRIPTION, MAX_EMBED_TOTAL - used))
    return {
        "content": escape(event.title, MAX_CONTENT),
        "embeds": [embed],
        "allowed_mentions": {"parse": []},
    }


def embed_units(embed: dict[str, Any]) -> int:
    """The characters Discord counts against the 6,000 limit of one embed."""
    total = units(embed.get("title", "")) + units(embed.get("description", ""))
    total += units(embed.get("footer", {}).get("text", "")) + units(embed.get("author", {}).get("name", ""))
    total += sum(units(f["name"]) + units(f["value"]) for f in embed.get("fields", []))
    return total


def _description(extra: dict[str, Any], budget: int) -> str:
    lines = []
    if extra.get("commit_title"):
        lines.append("Commit: " + escape(extra["commit_title"], 1000))
    summaries = list(extra.get("summaries") or [])
    reserve = 40  # for the "… and N more" line
    used = sum(units(line) + 1 for line in lines)
    for i, summary in enumerate(summaries):
        line = "• " + escape(summary, MAX_SUMMARY)
        if used + units(line) + 1 > budget - reserve:
            lines.append(f"… and {len(summaries) - i} more change(s)")
            break
        lines.append(line)
        used += units(line) + 1
    return "\n".join(lines)[:budget]


def classify(reply: Reply) -> Attempt:
    """An unknown webhook or a bad token ends the subscription; a rate limit may give its wait in the body."""
    if reply.refused and reply.status_code in (401, 404) and _error_code(reply.text) in PERMANENT:
        return Attempt("failed", reply.status_code, f"Discord: {reply.snippet}",
                       disable_reason=f"Discord answered {reply.status_code}: {reply.snippet}")
    return classify_reply(reply, _body_retry_after_s(reply.text))


def _error_code(text: str) -> int | None:
    try:
        code = json.loads(text).get("code")
    except (ValueError, AttributeError):
        return None
    return code if isinstance(code, int) else None


def _body_retry_after_s(text: str) -> float | None:
    """Discord's JSON `retry_after` (seconds), when the body is a JSON object that has one."""
    if not text.startswith("{"):
        return None
    try:
        value = json.loads(text).get("retry_after")
        return max(0.0, float(value)) if value is not None else None
    except (ValueError, TypeError, AttributeError):
        return None


FORMAT = WebhookFormat("discord", render=render, classify=classify, content_type=CONTENT_TYPE)
