"""Nothing is undocumented: every CLI command, option and argument, every setting, every kind and every
webhook message field carries the description its generated reference page shows."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import click
import pytest
from refdocs.cli import walk
from refdocs.configuration import ENTRIES, env_variable
from refdocs.webhooks import MODULES, SAMPLE_LINKS, dataset_sample_event, example, sample_event

from feeds.webhooks import FORMATS
from storage import kinds
from storage.models import Event
from tracker.cli import cli
from tracker.config import SECTIONS, load_settings
from tracker.config.loading import _overridden

EXAMPLE = Path(__file__).resolve().parents[2] / "config.example.toml"
MODELS = [*SECTIONS.values(), *ENTRIES]


def _undocumented(ctx: click.Context, command: click.Command) -> list[str]:
    path = ctx.command_path
    missing = [] if (command.help or "").strip() else [f"{path}: the command"]
    for param in command.params:
        if isinstance(param, click.Option) and not (param.help or "").strip():
            missing.append(f"{path}: option {'/'.join(param.opts)}")
        if isinstance(param, click.Argument):
            name = (param.metavar or param.human_readable_name).strip(".[]").upper()
            if not getattr(param, "help", None) and name not in (command.help or ""):
                missing.append(f"{path}: argument {name} is named nowhere in its help")
    return missing


def test_every_cli_command_option_and_argument_has_help() -> None:
    """Each command (hidden ones too) has help, each option a help text, each argument a line of its command's help."""
    walked = list(walk(cli))
    assert len(walked) > 20 and {"hubwatch watch add", "hubwatch deliveries redeliver"} <= {c.command_path for c, _ in walked}
    assert [m for ctx, command in walked for m in _undocumented(ctx, command)] == []


@pytest.mark.parametrize("model", MODELS, ids=lambda m: getattr(m, "table", None) or m.array)
def test_every_setting_has_a_description(model) -> None:
    """Every key of every [section], [[watch]] and [[webhooks]] has a Field description of at least a few words."""
    assert {key: f.description for key, f in model.model_fields.items() if len((f.description or "").split()) < 3} == {}


def test_example_config_lists_every_key_with_its_default() -> None:
    """config.example.toml names every key of every table and array, and its [section] values are the defaults."""
    text = EXAMPLE.read_text(encoding="utf-8")
    assert [f"{m.__name__}.{key}" for m in MODELS for key in m.model_fields if f"{key} =" not in text] == []
    settings = load_settings(str(EXAMPLE), env={})
    for name, model in SECTIONS.items():
        assert getattr(settings, name).model_dump() == model().model_dump(), f"[{name}] differs from the defaults"


def test_documented_environment_variables_are_the_ones_read() -> None:
    """The variable the reference names for each [section] key is the one loading reads for it."""
    for name, model in SECTIONS.items():
        for key in model.model_fields:
            assert _overridden(name, model, {}, {env_variable(name, key): "from-env"}) == {key: "from-env"}


@pytest.mark.parametrize("names, descriptions", [
    (kinds.SEVERITIES, kinds.SEVERITY_DESCRIPTIONS),
    (kinds.CHANGE_KINDS, kinds.CHANGE_KIND_DESCRIPTIONS),
    (kinds.EVENT_KINDS, kinds.EVENT_KIND_DESCRIPTIONS),
    (kinds.REPO_STATES, kinds.REPO_STATE_DESCRIPTIONS),
], ids=["severities", "change-kinds", "event-kinds", "repo-states"])
def test_every_kind_has_a_description(names, descriptions) -> None:
    """Every severity, change kind and event kind of storage.kinds has a description, and nothing else does."""
    assert set(descriptions) == set(names)
    assert [name for name in names if len(descriptions[name].split()) < 3] == []


def _json_type(value: object) -> str:
    if isinstance(value, list):
        return "array of " + (_json_type(value[0]) + "s" if value else "strings")
    words = {bool: "boolean", int: "integer", float: "number", str: "string", dict: "object", type(None): "null"}
    return words[type(value)]


def _fields(value: object, prefix: str = "") -> dict[str, object]:
    """Every JSON path in `value` (`[]` for an array's items) with one value found there."""
    found: dict[str, object] = {}
    items = value.items() if isinstance(value, dict) else [("[]", v) for v in value] if isinstance(value, list) else []
    for key, item in items:
        path = f"{prefix}{key}" if key == "[]" else f"{prefix}.{key}" if prefix else key
        if key != "[]":
            found.setdefault(path, item)
        found.update({p: v for p, v in _fields(item, path).items() if p not in found})
    return found


def _bare_event() -> Event:
    """An event about no commit, without a payload: what an advisory or a visibility change may look like."""
    return Event(seq=1, event_id="e", kind="advisory.published", repo_id="org/model", sha=None, title="t",
                 severity="critical", security=True, created_at=datetime(2025, 1, 1, tzinfo=UTC), payload={})


@pytest.mark.parametrize("name", list(FORMATS))
def test_webhook_fields_are_the_messages_fields(name) -> None:
    """Each format documents exactly the fields its builder writes for the sample event, with their JSON types."""
    documented = MODULES[name].FIELDS
    sample = _fields(example(FORMATS[name])[0])
    sample.update({p: v for p, v in _fields(example(FORMATS[name], dataset_sample_event())[0]).items() if p not in sample})
    bare = _fields(json.loads(FORMATS[name].render(_bare_event(), SAMPLE_LINKS)))
    assert set(sample) == set(documented)
    assert set(bare) <= set(documented)
    for path, value in [*sample.items(), *bare.items()]:
        assert _json_type(value) in documented[path][0].split(" or "), (path, value, documented[path][0])


def test_sample_event_is_a_revision_event_with_every_part() -> None:
    """The sample the examples are built from carries a commit, summaries and a prompt sample, so every field shows."""
    event = sample_event()
    assert event.kind in kinds.EVENT_KINDS and event.sha and {"summaries", "prompt", "commit_title"} <= set(event.payload)
