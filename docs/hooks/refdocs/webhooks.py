"""The webhook payload reference: for each format of feeds.webhooks.FORMATS, its message fields (the FIELDS its
module declares beside the code that builds the message) and an example: the real builder run on a sample
event, with the headers the dispatcher sends (signed with a sample secret where the format signs)."""

from __future__ import annotations

import base64
import inspect
import json
from datetime import UTC, datetime
from types import ModuleType
from typing import Any

from feeds.webhooks import FORMATS, Links, apprise, discord, generic, slack
from feeds.webhooks.formats import WebhookFormat
from refdocs.markdown import cell, code, fenced, json_block, table
from storage.delivery_queue import delivery_id
from storage.models import Event

MODULES: dict[str, ModuleType] = {m.FORMAT.name: m for m in (generic, slack, discord, apprise)}
SAMPLE_LINKS = Links(hub_endpoint="https://huggingface.co", public_url="https://hubwatch.example.com")
SAMPLE_SECRET = "whsec_" + base64.b64encode(b"hubwatch documentation sample key").decode("ascii")
SAMPLE_SUBSCRIPTION = 7


def sample_event() -> Event:
    """A chat template change of a watched repo, as the tracker stores it (a revision event with a prompt sample)."""
    return Event(
        seq=1042,
        event_id="5d1c7f0e-3b8a-5e2c-9a41-6f0d2b7c8e93",
        kind="revision.ingested",
        repo_id="meta-llama/Llama-3.1-8B-Instruct",
        revision_id=87,
        sha="0e9e39f249a16976918f6564b8830bc894c89659",
        title="Llama-3.1-8B-Instruct: chat template and eos token changed (warning)",
        severity="warning",
        security=False,
        created_at=datetime(2025, 3, 14, 9, 26, 53, tzinfo=UTC),
        payload={
            "commit_title": "Update tokenizer_config.json",
            "baseline": False,
            "kinds": ["chat_template", "tokenizer"],
            "summaries": ["chat template 'default' changed: 3 lines added, 1 removed",
                          "eos_token: '<|end_of_text|>' -> '<|eot_id|>'"],
            "prompt": {"template": "tokenizer_config.json", "conversation": "system-user",
                       "before": "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|end_of_text|>",
                       "after": "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"},
        },
    )


def example(fmt: WebhookFormat, event: Event | None = None) -> tuple[Any, dict[str, str]]:
    """The parsed message `fmt` builds for `event` (default: the sample), and the headers it is posted with."""
    event = event or sample_event()
    body = fmt.render(event, SAMPLE_LINKS)
    if not fmt.posted:
        return json.loads(body), {}
    secret = SAMPLE_SECRET if fmt.needs_secret else None
    msg_id = delivery_id(event.event_id, SAMPLE_SUBSCRIPTION)
    headers = {"content-type": fmt.content_type, **fmt.headers(msg_id, int(event.created_at.timestamp()), body, secret)}
    return json.loads(body), headers


def _summary(module: ModuleType) -> str:
    """The first paragraph of the format module's docstring."""
    return " ".join(inspect.cleandoc(module.__doc__ or "").split("\n\n", 1)[0].split())


def format_section(name: str) -> list[str]:
    module, fmt = MODULES[name], FORMATS[name]
    rows = [(code(path), cell(kind), cell(meaning)) for path, (kind, meaning) in module.FIELDS.items()]
    message, headers = example(fmt)
    out = [f"## {name} {{ #{name} }}", "", cell(_summary(module)), "",
           table(("Field", "Type", "Meaning"), rows), "", "Example message:", "", json_block(message), ""]
    if headers:
        out += ["Headers it is posted with:", "", fenced("\n".join(f"{k}: {v}" for k, v in headers.items()), "http"), ""]
    else:
        out += ["Apprise sends these fields to the service its URL names; nothing is posted by hubwatch itself.", ""]
    return out


def render() -> str:
    """Every format, in the order of the registry."""
    out: list[str] = []
    for name in FORMATS:
        out += format_section(name)
    return "\n".join(out)
