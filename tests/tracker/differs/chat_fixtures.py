"""Shared helpers for the chat template tests: the real templates under tests/fixtures, and snapshots.

Imported explicitly (not a conftest.py: tests/tracker/differs/ is shared with other differs' tests).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from tracker.revision.snapshot import FileEntry, Snapshot

TEMPLATES = Path(__file__).resolve().parents[2] / "fixtures" / "chat_templates"

LLAMA3_INITIAL = "meta-llama-Meta-Llama-3-8B-Instruct/2024-04-initial.jinja"
LLAMA3_FIXED = "meta-llama-Meta-Llama-3-8B-Instruct/2024-05-add-generation-prompt.jinja"
LLAMA33 = "meta-llama-Llama-3.3-70B-Instruct/chat_template.jinja"
LLAMA32 = "meta-llama-Llama-3.2-3B-Instruct/chat_template.jinja"
QWEN2 = "Qwen-Qwen2-7B-Instruct/chat_template.jinja"
QWEN25 = "Qwen-Qwen2.5-7B-Instruct/chat_template.jinja"
GEMMA2 = "google-gemma-2-2b-it/chat_template.jinja"
NEMO = "mistralai-Mistral-Nemo-Instruct-2407/chat_template.jinja"
COMMAND_R = {name: f"CohereForAI-c4ai-command-r-plus/{name}.jinja" for name in ("default", "tool_use", "rag")}
ALL_TEMPLATES = (LLAMA3_INITIAL, LLAMA3_FIXED, LLAMA33, LLAMA32, QWEN2, QWEN25, GEMMA2, NEMO, *COMMAND_R.values())

LLAMA3_TOKENS = {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"}
MISTRAL_TOKENS = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}


def template(name: str) -> str:
    """The text of one real template (see tests/fixtures/chat_templates/SOURCES.md)."""
    return (TEMPLATES / name).read_text(encoding="utf-8")


def tokenizer_config(chat_template: Any = None, **fields: Any) -> dict[str, Any]:
    """A tokenizer_config.json body; `chat_template` left out when None."""
    config: dict[str, Any] = {"tokenizer_class": "PreTrainedTokenizerFast", **fields}
    if chat_template is not None:
        config["chat_template"] = chat_template
    return config


def named(**templates: str) -> list[dict[str, str]]:
    """The list form of tokenizer_config.json's chat_template, in the order given."""
    return [{"name": name, "template": text} for name, text in templates.items()]


def snapshot(files: dict[str, Any], *, sha: str = "a" * 40, unavailable: dict[str, str] | None = None) -> Snapshot:
    """A snapshot holding `files`: str and bytes as they are, anything else as JSON. Paths named in
    `unavailable` are in the tree but their bytes are not held."""
    snap = Snapshot(repo_id="org/model", sha=sha)
    for path, value in files.items():
        data = value if isinstance(value, bytes) else value.encode() if isinstance(value, str) else json.dumps(value).encode()
        oid = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
        snap.files[path] = FileEntry(path=path, oid=oid, size=len(data))
        snap.contents[path] = data
    for path, reason in (unavailable or {}).items():
        snap.files[path] = FileEntry(path=path, oid="0" * 40, size=0)
        snap.unavailable[path] = reason
    return snap
