"""The generic format: a Standard Webhooks message, signed.

Body: `{"type": <event kind>, "timestamp": <when the event happened>, "data": {...}}` as compact
ASCII JSON (control characters and non-ASCII arrive as JSON escapes, exactly as stored). Headers:
`webhook-id` (the delivery id, the same on every retry), `webhook-timestamp` (this attempt, Unix
seconds) and `webhook-signature`: `v1,<base64 HMAC-SHA256 of "id.timestamp.body">`, one per secret,
space-separated, while secrets rotate (feeds.webhooks.formats.standard_headers, which Slack and Discord
deliveries also carry, signed only when given a secret). Every generic delivery is signed: a subscription
needs a secret (storage.kinds.SIGNED_WEBHOOK_FORMATS).
"""

from __future__ import annotations

import json
from typing import Any

from feeds.webhooks.formats import Links, WebhookFormat
from storage.models import Event

CONTENT_TYPE = "application/json"
MAX_SUMMARIES = 200  # a revision touching thousands of files still makes a small message

# The message's fields, for the documentation: JSON path ([] an array's items) -> (JSON type, meaning).
FIELDS: dict[str, tuple[str, str]] = {
    "type": ("string", "The event kind (revision.ingested, advisory.published, ...): the Standard Webhooks event type."),
    "timestamp": ("string", "When the event happened (ISO 8601, UTC)."),
    "data": ("object", "The event."),
    "data.event_id": ("string", "The event's stable id, the same in feeds and the API (not the delivery's webhook-id)."),
    "data.seq": ("integer", "The event's place in the event log: later events have larger numbers."),
    "data.kind": ("string", "The event kind, as in type."),
    "data.repo_id": ("string", "The repo the event is about (org/name)."),
    "data.sha": ("string or null", "The commit the event is about; null for an event about no one commit."),
    "data.title": ("string", "One line a person can act on."),
    "data.severity": ("string", "info, notice, warning or critical."),
    "data.security": ("boolean", "Whether the event is security-relevant."),
    "data.created_at": ("string", "When the event happened (ISO 8601, UTC), as timestamp."),
    "data.commit_title": ("string or null", "The commit's title on the Hub; null when the event names no commit."),
    "data.baseline": ("boolean", "The first revision recorded of a newly watched repo: nothing was compared."),
    "data.change_kinds": ("array of strings", "The change kinds among the revision's changes (chat_template, weights, ...)."),
    "data.summaries": ("array of strings", f"One line per change, the first {MAX_SUMMARIES}."),
    "data.summaries_total": ("integer", "How many changes there are in all (summaries may be cut)."),
    "data.links": ("object", "Where to look."),
    "data.links.repo": ("string", "The repo on the Hub."),
    "data.links.commit": ("string", "The commit on the Hub; only when the event names a commit."),
    "data.links.page": ("string", "The revision's page on this server; only when [server] public_url is set."),
}


def payload(event: Event, links: Links) -> dict[str, Any]:
    extra = event.payload or {}
    summaries = list(extra.get("summaries") or [])
    data = {
        "event_id": event.event_id,
        "seq": event.seq,
        "kind": event.kind,
        "repo_id": event.repo_id,
        "sha": event.sha,
        "title": event.title,
        "severity": event.severity,
        "security": event.security,
        "created_at": event.created_at.isoformat(),
        "commit_title": extra.get("commit_title"),
        "baseline": bool(extra.get("baseline", False)),
        "change_kinds": list(extra.get("kinds") or []),
        "summaries": summaries[:MAX_SUMMARIES],
        "summaries_total": len(summaries),
        "links": links.for_event(event),
    }
    return {"type": event.kind, "timestamp": event.created_at.isoformat(), "data": data}


def render(event: Event, links: Links) -> bytes:
    return json.dumps(payload(event, links), ensure_ascii=True, separators=(",", ":")).encode("ascii")


FORMAT = WebhookFormat("generic", render=render, content_type=CONTENT_TYPE)
