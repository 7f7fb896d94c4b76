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
    "data.dataset": ("object", "A dataset revision's data (revision.ingested and dataset.* events of a dataset; absent otherwise)."),
    "data.dataset.line": ("string", "One line: configs, splits, rows now and their net change, column changes."),
    "data.dataset.splits": ("array of objects", "Per config and split, the rows before and after (the first 100)."),
    "data.dataset.splits[].config": ("string", "The config (the name load_dataset takes)."),
    "data.dataset.splits[].split": ("string", "The split."),
    "data.dataset.splits[].before": ("integer or null", "Rows at the parent revision; null: not there, or not all counted."),
    "data.dataset.splits[].after": ("integer or null", "Rows at this revision; null: gone, or not all counted."),
    "data.dataset.splits[].delta": ("integer or null", "after - before, when both are known."),
    "data.dataset.splits[].state": ("string", "same, added (new split) or removed (split gone)."),
    "data.dataset.splits[].columns": ("integer", "How many columns the split has."),
    "data.dataset.splits_total": ("integer", "How many config/split rows there are in all (splits may be cut)."),
    "data.dataset.schema": ("array of objects", "The schema diff: each column added, removed or retyped (the first 100)."),
    "data.dataset.schema[].config": ("string", "The config."),
    "data.dataset.schema[].column": ("string", "The column."),
    "data.dataset.schema[].change": ("string", "added, removed or retyped."),
    "data.dataset.schema[].before": ("string or null", "Its type before (HF feature type where the files state one)."),
    "data.dataset.schema[].after": ("string or null", "Its type after."),
    "data.dataset.schema[].splits": ("array of strings", "The splits the change applies to."),
    "data.dataset.schema_total": ("integer", "How many column changes there are in all."),
    "data.dataset.licence": ("object", "The card's licence."),
    "data.dataset.licence.before": ("string or null", "At the parent revision (null: none declared, or a baseline)."),
    "data.dataset.licence.after": ("string or null", "At this revision (null: none declared)."),
    "data.dataset.gated": ("object", "The Hub's gate."),
    "data.dataset.gated.before": ("boolean or string or null", "At the parent: false, auto, manual, or null (unknown)."),
    "data.dataset.gated.after": ("boolean or string or null", "Now: false, auto, manual, or null (unknown)."),
    "data.dataset.loading_script": ("string or null", "The loading script at the root, if any."),
    "data.dataset.script_only": ("boolean", "Only a loading script, no data files: datasets 4.0 and later cannot load it."),
    "data.dataset.notes": ("array of strings", "Licence, gate, loading-script and card-count notes."),
    "data.dataset.conversion": ("object or null", "The viewer's Parquet conversion (refs/convert/parquet), when read."),
    "data.dataset.conversion.sha": ("string", "The conversion's commit."),
    "data.dataset.conversion.source_sha": ("string or null", "The revision it was made from."),
    "data.dataset.conversion.lagging": ("boolean", "It was made before this revision (said, not compared)."),
    "data.dataset.conversion.state": ("string", "The same in words."),
    "data.dataset.conversion.configs": ("array of strings", "The configs it holds."),
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
    if isinstance(extra.get("dataset"), dict):
        data["dataset"] = extra["dataset"]
    return {"type": event.kind, "timestamp": event.created_at.isoformat(), "data": data}


def render(event: Event, links: Links) -> bytes:
    return json.dumps(payload(event, links), ensure_ascii=True, separators=(",", ":")).encode("ascii")


FORMAT = WebhookFormat("generic", render=render, content_type=CONTENT_TYPE)
