"""The shared vocabulary (storage/kinds.py) is the one every package speaks."""

from __future__ import annotations

import pytest

from feeds.http.params import Severity as SeverityParam
from feeds.http.params import bad_kinds
from feeds.webhooks import FORMATS as RENDERERS
from storage import kinds
from tracker.config import validate_repo_id
from tracker.errors import ConfigError
from tracker.revision.changes import ChangeKind, Severity


def test_tracker_enums_are_the_column_values():
    """tracker's Severity and ChangeKind hold exactly the values storage writes, severities in order."""
    assert [s.value for s in Severity] == list(kinds.SEVERITIES)
    assert [k.value for k in ChangeKind] == list(kinds.CHANGE_KINDS)
    assert sorted(Severity, key=lambda s: s.rank) == list(Severity)


def test_feeds_speak_the_same_vocabulary():
    """The API's severity parameter and the webhook renderers cover the shared values, no more."""
    assert [s.value for s in SeverityParam] == list(kinds.SEVERITIES)
    assert tuple(RENDERERS) == kinds.WEBHOOK_FORMATS


@pytest.mark.parametrize(
    ("minimum", "expected"),
    [("info", kinds.SEVERITIES), ("warning", ("warning", "critical")), ("critical", ("critical",))],
)
def test_at_least_orders_severities(minimum, expected):
    """`at_least` keeps the severities at or above the floor."""
    assert kinds.at_least(minimum) == expected


def test_at_least_names_the_allowed_values():
    """An unknown severity is refused with the list of known ones."""
    with pytest.raises(ValueError, match="info, notice, warning, critical"):
        kinds.at_least("loud")


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("meta-llama/Llama-3.1-8B-Instruct", True),
        ("org/name", True),
        ("org", False),
        ("org/name/extra", False),
        ("org/../name", False),
        ("-org/name", False),
        ("org/" + "x" * 97, False),
        (None, False),
    ],
)
def test_repo_id_pattern(value, ok):
    """Repo ids follow the Hub's rules in the tracker and in storage alike."""
    assert kinds.is_repo_id(value) is ok
    if ok:
        assert validate_repo_id(value) == value
    else:
        with pytest.raises(ConfigError):
            validate_repo_id(value)


@pytest.mark.parametrize(
    ("value", "key", "repo_type", "hub_id"),
    [
        ("org/name", True, "model", "org/name"),
        ("datasets/org/name", True, "dataset", "org/name"),
        ("datasets/org", False, "model", "datasets/org"),
        ("datasets/org/../x", False, "model", "datasets/org/../x"),
        ("datasets/-org/name", False, "dataset", "-org/name"),
        ("spaces/org/name", False, "model", "spaces/org/name"),
    ],
)
def test_repo_keys(value, key, repo_type, hub_id):
    """A stored key is a model's id or `datasets/` + a dataset's id; it splits into the repo type and the Hub id."""
    assert kinds.is_repo_key(value) is key and kinds.split_repo_key(value) == (repo_type, hub_id)
    if key:
        assert validate_repo_id(value) == value and kinds.repo_key(hub_id, repo_type) == value
        assert kinds.org_of(value) == "org"
    else:
        with pytest.raises(ConfigError):
            validate_repo_id(value)


@pytest.mark.parametrize(
    ("kind", "ok"),
    [("chat_template", True), ("advisory", True), ("revision.ingested", True), ("future.kind", True),
     ("revision", False), ("Chat_Template", False), ("a.b.c", False)],
)
def test_filter_kinds(kind, ok):
    """A kind filter takes change kinds, `advisory` and dotted event kinds."""
    assert kinds.is_filter_kind(kind) is ok
    assert bad_kinds([kind]) == ([] if ok else [kind])


def test_a_model_has_a_huggingface_purl_and_a_dataset_none():
    """The registered `huggingface` purl type names models: a dataset's key would read as a model's purl."""
    sha = "A" * 40
    assert kinds.repo_purl("org/name", sha) == f"pkg:huggingface/org/name@{'a' * 40}"
    assert kinds.repo_purl("org/name") == "pkg:huggingface/org/name"
    assert kinds.repo_purl("datasets/org/name", sha) is None
