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
