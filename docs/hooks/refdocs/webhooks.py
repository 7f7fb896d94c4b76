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
from tracker.revision.dataset_table import dataset_table

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


def _split(rows: int, columns: dict[str, str]) -> dict[str, Any]:
    return {"rows": rows, "rows_known": True, "shards": ["data/0.parquet"], "columns": columns}


def dataset_sample_event() -> Event:
    """A dataset revision as the tracker stores it: 5 test rows removed, a column added to train, relicensed,
    its Parquet conversion lagging (the payload's `dataset`, tracker/revision/dataset_table.py, made by the
    tracker's own code from two summaries)."""
    qa = {"question": "Value(string)", "answer": "Value(string)"}
    before = {"licence": "apache-2.0", "gated": False, "shards": {"data/0.parquet": {}},
              "configs": {"default": {"splits": {"train": _split(100, qa), "test": _split(20, qa)}}}}
    after = {"licence": "mit", "gated": False, "shards": {"data/0.parquet": {}},
             "configs": {"default": {"splits": {"train": _split(100, {**qa, "source": "Value(string)"}),
                                                "test": _split(15, qa)}}},
             "conversion": {"sha": "8f2b6c1d0e9a7b3c4d5e6f708192a3b4c5d6e7f8", "lagging": True,
                            "source_sha": "3c9d1e2f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d", "configs": {"default": {}}}}
    return Event(
        seq=1043, event_id="2a7e4c9b-6d1f-5b3a-8c2e-0f9d7b5a3c1e", kind="revision.ingested",
        repo_id="datasets/allenai/super", revision_id=88, sha="b41f2e8c7d6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c",
        title="super (dataset): rows and columns changed (warning)", severity="warning", security=False,
        created_at=datetime(2025, 3, 14, 9, 31, 7, tzinfo=UTC),
        payload={"commit_title": "Remove opt-out rows, add source, relicense", "baseline": False, "kinds": ["dataset"],
                 "summaries": ["config default: column(s) added: source (Value(string))",
                               "config default, split test: 5 rows removed (20 -> 15)"],
                 "dataset": dataset_table(before, after)})


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
    if name != "apprise":  # Apprise's fields carry the summaries only
        out += ["Example message for a dataset revision (its rows per config and split, and its schema diff):", "",
                json_block(example(fmt, dataset_sample_event())[0]), ""]
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
