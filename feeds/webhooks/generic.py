"""The generic format: a Standard Webhooks message, signed.

Body: `{"type": <event kind>, "timestamp": <when the event happened>, "data": {...}}` as compact
ASCII JSON (control characters and non-ASCII arrive as JSON escapes, exactly as stored). Headers:
`webhook-id` (the delivery id, the same on every retry), `webhook-timestamp` (this attempt, Unix
seconds) and `webhook-signature`: `v1,<base64 HMAC-SHA256 of "id.timestamp.body">`, one per secret,
space-separated, while secrets rotate.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from typing import TYPE_CHECKING, Any

from storage.models import Event
from storage.subscriptions import secret_keys

if TYPE_CHECKING:
    from feeds.webhooks import Links

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


def sign(msg_id: str, timestamp: int, body: bytes, secret: str) -> str:
    """The `webhook-signature` value: one `v1,<base64>` per key in the secret, space-separated."""
    signed = f"{msg_id}.{timestamp}.".encode() + body
    return " ".join(
        "v1," + base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode("ascii")
        for key in secret_keys(secret)
    )


def headers(msg_id: str, timestamp: int, body: bytes, secret: str | None) -> dict[str, str]:
    """Standard Webhooks headers; unsigned only where no secret applies (Slack, Discord)."""
    out = {"webhook-id": msg_id, "webhook-timestamp": str(timestamp)}
    if secret:
        out["webhook-signature"] = sign(msg_id, timestamp, body, secret)
    return out
