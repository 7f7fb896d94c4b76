"""The Discord format: a webhook message with one embed, within Discord's limits.

Limits kept: `content` at most 2,000 characters, at most 10 embeds and 6,000 characters across
them (title 256, description 4,096, field values 1,024). Repo text has its markdown escaped with
backslashes (so `[x](url)`, `**`, `# heading` and `<@id>` show literally), `@` is followed by a
zero-width space (`@everyone` cannot ping), control characters are made visible, and
`allowed_mentions: {"parse": []}` tells Discord to ping no one whatever the text says.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from feeds.views.prompt_diff import event_excerpt
from feeds.webhooks.chat_text import fit, units, visible
from storage.models import Event

if TYPE_CHECKING:
    from feeds.webhooks import Links

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
_COLORS = {"info": 0x95A5A6, "notice": 0x3498DB, "warning": 0xF39C12, "critical": 0xE74C3C}


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
