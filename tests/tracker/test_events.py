"""Event titles a person can act on, and stable event ids."""

from __future__ import annotations

import pytest

from storage.kinds import REVISION_INGESTED
from tracker.revision.changes import Change, ChangeKind, Severity
from tracker.revision.events import PROMPT_SAMPLE_CHARS, event_id, revision_event, revision_title

WARNING, INFO, CRITICAL = Severity.WARNING, Severity.INFO, Severity.CRITICAL


def _c(kind: ChangeKind, severity: Severity, summary: str = "x", **detail: object) -> Change:
    return Change(kind=kind, path="p", summary=summary, severity=severity, detail=dict(detail))


@pytest.mark.parametrize(
    ("changes", "title"),
    [
        (
            [_c(ChangeKind.CHAT_TEMPLATE, WARNING, change="changed"),
             _c(ChangeKind.CONFIG, WARNING, changes=[{"path": "eos_token_id[2]"}])],
            "Llama-3.1-8B-Instruct: chat template and eos token changed (warning)",
        ),
        (
            [_c(ChangeKind.CONFIG, WARNING, changes=[{"path": "eos_token_id"}, {"path": "temperature"}])],
            "Llama-3.1-8B-Instruct: config and eos token changed (warning)",
        ),
        (
            [_c(ChangeKind.CHAT_TEMPLATE, INFO, change="moved")],
            "Llama-3.1-8B-Instruct: chat template moved, text unchanged (info)",
        ),
        (
            [_c(ChangeKind.WEIGHTS, CRITICAL), _c(ChangeKind.CUSTOM_CODE, CRITICAL), _c(ChangeKind.FILES, INFO)],
            "Llama-3.1-8B-Instruct: weights, custom code and files changed (critical)",
        ),
        (
            [_c(ChangeKind.REPO, WARNING, rewrite=True), _c(ChangeKind.CONFIG, WARNING, changes=[{"path": "num_hidden_layers"}])],
            "Llama-3.1-8B-Instruct: config changed; history rewritten (warning)",
        ),
        ([], "Llama-3.1-8B-Instruct: new commit, nothing tracked changed (info)"),
    ],
)
def test_revision_titles(changes: list[Change], title: str) -> None:
    """Titles name what changed in plain words, with the highest severity."""
    assert revision_title("meta-llama/Llama-3.1-8B-Instruct", changes, False, 10) == title


def test_baseline_title() -> None:
    """A first revision says the repo is now watched."""
    assert revision_title("org/m", [], True, 1) == "m: now watched, baseline of 1 file recorded"


def test_event_ids_are_stable_and_distinct() -> None:
    """The same revision always yields the same event id; another sha or kind yields another."""
    a = event_id("org/m", "1" * 40, REVISION_INGESTED)
    assert a == event_id("org/m", "1" * 40, REVISION_INGESTED)
    assert a != event_id("org/m", "2" * 40, REVISION_INGESTED)
    assert a != event_id("org/m", "1" * 40, "estimate.changed")


def test_revision_event_carries_security_and_severity() -> None:
    """A revision event is security-relevant when any change is, and as severe as the worst."""
    event = revision_event("org/m", "1" * 40, "t", "commit", [_c(ChangeKind.FILES, INFO), _c(ChangeKind.CUSTOM_CODE, CRITICAL)], False)
    assert event.severity == "critical" and event.kind == REVISION_INGESTED
    assert event.payload["kinds"] == ["custom_code", "files"]


def test_revision_event_carries_the_first_changed_prompt() -> None:
    """A chat-template change's first differing sample rides on the event (clipped) for chat messages."""
    samples = [
        {"conversation": "same", "before": {"prompt": "a"}, "after": {"prompt": "a"}, "differs": False},
        {"conversation": "broken", "before": {"error": "loop"}, "after": {"prompt": "b"}, "differs": True},
        {"conversation": "tools", "before": {"prompt": "x" * 9000}, "after": {"prompt": "y"}, "differs": True},
    ]
    changes = [_c(ChangeKind.CONFIG, INFO), _c(ChangeKind.CHAT_TEMPLATE, WARNING, samples=samples)]
    prompt = revision_event("org/m", "1" * 40, "t", "commit", changes, False).payload["prompt"]
    assert prompt["conversation"] == "tools" and prompt["template"] == "p"
    assert prompt["before"] == "x" * PROMPT_SAMPLE_CHARS and prompt["after"] == "y"
    plain = revision_event("org/m", "1" * 40, "t", "commit", [_c(ChangeKind.CONFIG, INFO)], False)
    assert "prompt" not in plain.payload


def test_an_engine_change_naming_its_samples_by_id_is_no_prompt() -> None:
    """An engine break lists its samples by id (strings): the event is built, with the prompt of a real render change."""
    engine = _c(ChangeKind.CHAT_TEMPLATE, WARNING, change="engine_broken", engine="minijinja", samples=["default/a/generation"])
    rendered = _c(ChangeKind.CHAT_TEMPLATE, WARNING, samples=[
        {"conversation": "c", "before": {"prompt": "a"}, "after": {"prompt": "b"}, "differs": True}])
    assert "prompt" not in revision_event("org/m", "1" * 40, "t", "commit", [engine], False).payload
    assert revision_event("org/m", "1" * 40, "t", "commit", [engine, rendered], False).payload["prompt"]["after"] == "b"
