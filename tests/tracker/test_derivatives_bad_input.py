"""Bad input in a followed family, each named in the pass report while the rest is still checked: a cycle, a
card naming a base the Hub does not have, a card whose base_model is a list or malformed, a derivative deleted
(gone at its head check, or gone from the listing), and a base with 10,000 derivatives (capped)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from storage.kinds import is_repo_id
from tests.support.derivative_repos import (
    AWQ,
    BASE,
    CYCLE_BASE,
    CYCLE_DERIVED,
    CYCLE_QUANT,
    FINETUNE,
    GGUF,
    GHOST_NAMED,
    MISSING_BASE,
    write_bad_family,
    write_family,
)
from tests.support.settings import settings_for
from tracker.cli.app import App
from tracker.family.derivatives import _card_notes
from tracker.hub.client import CardHead
from tracker.standins.replay.control import BUNDLED_ROOT, ReplayServer
from tracker.standins.replay.history import synthetic_history


@pytest.fixture
def hub(tmp_path) -> Iterator[ReplayServer]:
    write_family(tmp_path / "family")
    write_bad_family(tmp_path / "bad")
    server = ReplayServer(roots=[BUNDLED_ROOT, tmp_path / "family", tmp_path / "bad"])
    server.set_head(BASE, 2)
    server.set_head(GGUF, 1)
    with server:
        yield server


def _app(hub: ReplayServer, database_url: str, base: str, limit: int = 100) -> App:
    app = App(settings_for(hub.endpoint, database_url))  # type: ignore[arg-type]
    app.store.watches.add_watch(base, "main", 900)
    app.store.derivatives.follow(base, ("quantized", "finetune"), limit)
    return app


def _poll(app: App) -> None:
    [outcome] = app.poller.poll()
    assert not outcome.failed, outcome.error


def _report(app: App, base: str) -> dict[str, Any]:
    return app.store.derivatives.get_follow(base).last_report


def _statuses(app: App, base: str) -> dict[str, dict[str, str]]:
    return {r["repo_id"]: {p: s["status"] for p, s in r["parts"].items()} for r in app.store.derivatives.tree(base)["derivatives"]}


def test_a_cycle_is_named_and_the_rest_checked(hub, database_url):
    """B's card names A as its base and A's names B: A is named as a cycle, not checked; B's quantization is."""
    app = _app(hub, database_url, CYCLE_BASE)
    try:
        _poll(app)
        report = _report(app, CYCLE_BASE)
        cycle = f"{CYCLE_DERIVED}: cycle: {CYCLE_DERIVED} derives from {CYCLE_BASE}, whose card names {CYCLE_DERIVED}"
        assert cycle in "\n".join(report["problems"])
        statuses = _statuses(app, CYCLE_BASE)
        assert statuses[CYCLE_QUANT]["chat_template"] == "carries" and statuses[CYCLE_DERIVED] == {}
        assert report["checked"] == 1 and report["followed"] == 2
        assert not [r for r in hub.requests if r.path.startswith(f"/api/models/{CYCLE_DERIVED}")]  # not even its head
    finally:
        app.store.engine.dispose()


def test_a_base_model_the_hub_lacks_is_named_once_per_head(hub, database_url):
    """A card whose base_model list names, beside the base, a repo the Hub does not have: named (asked of the Hub
    once), the derivative still checked; a later pass at the same head names it again without asking."""
    app = _app(hub, database_url, BASE)
    try:
        _poll(app)
        note = f"{GHOST_NAMED}: the card's base_model names {MISSING_BASE}, which does not exist on the Hub"
        assert note in _report(app, BASE)["problems"]
        assert _statuses(app, BASE)[GHOST_NAMED]["chat_template"] == "carries"
        asked = [r for r in hub.requests if r.path.startswith(f"/api/models/{MISSING_BASE}")]
        assert len(asked) == 1
        hub.reset_requests()
        _poll(app)
        assert note in _report(app, BASE)["problems"]
        assert not [r for r in hub.requests if r.path.startswith(f"/api/models/{MISSING_BASE}")]
    finally:
        app.store.engine.dispose()


def test_deleted_derivatives_are_named_and_the_rest_checked(hub, database_url):
    """One derivative 404s at its head check (deleted after the listing), another leaves the listing: both named,
    the others still checked, the one gone from the listing kept in the database but no longer shown."""
    app = _app(hub, database_url, BASE)
    try:
        _poll(app)
        hub.inject(404, path=rf"^/api/models/{re.escape(GGUF)}$", method="GET", headers={"X-Error-Code": "RepoNotFound"})
        hub.set_head(AWQ, 0)  # deleted: neither listed nor served
        hub.set_head(BASE, 3)
        _poll(app)
        problems = "\n".join(_report(app, BASE)["problems"])
        assert f"{GGUF}: gone: {GGUF} does not exist on the Hub" in problems
        assert f"{AWQ}: no longer listed under {BASE}" in problems
        statuses = _statuses(app, BASE)
        assert AWQ not in statuses and statuses[FINETUNE]["chat_template"] == "carries"
        assert AWQ in {d.repo_id for d in app.store.derivatives.derivatives(BASE, listed_only=False)}
        [reach] = [e for e in app.store.history.list_events(BASE) if e.kind == "derivatives.reached"]
        assert AWQ not in str(reach.payload["derivatives"])
    finally:
        app.store.engine.dispose()


def test_ten_thousand_derivatives_are_capped(hub, database_url):
    """A base with 10,000 quantizations: one listing request, the `limit` most downloaded followed, the report
    saying how many were listed and that the rest are not followed."""
    for i in range(10_000):
        repo = synthetic_history(f"many{i % 50}/quant-{i:05d}")
        repo.meta_card_data = {"base_model": BASE, "base_model_relation": "quantized"}
        repo.downloads = i
        hub.add_repo(repo)
    app = _app(hub, database_url, BASE, limit=20)
    app.store.derivatives.follow(BASE, ("quantized",), 20)
    try:
        _poll(app)
        report = _report(app, BASE)
        assert report["listed"] == 20 and report["followed"] == 20
        assert f"{BASE} has at least 20 derivatives listed; the 20 most downloaded are followed" in report["problems"][0]
        rows = app.store.derivatives.tree(BASE)["derivatives"]
        assert [r["repo_id"] for r in rows][:2] == ["many49/quant-09999", "many48/quant-09998"]
        assert len(rows) == 20 and all(r["head_sha"] for r in rows)  # each checked at its head
        assert len([r for r in hub.requests if r.path == "/api/models"]) == 1
    finally:
        app.store.engine.dispose()


@pytest.mark.parametrize(("base_model", "expected"), [
    (BASE, []),
    ([BASE, "other/Base"], []),
    ([BASE, 42, None], ["the card's base_model holds 2 malformed entries (42, None); the rest was read"]),
    (["not a repo id", BASE], ["the card's base_model holds 1 malformed entry ('not a repo id'); the rest was read"]),
    ({"name": "x/y"}, ["the card's base_model is malformed (dict: \"{'name': 'x/y'}\"); checked as the listing says"]),
    (None, ["the card's base_model is malformed (NoneType: 'None'); checked as the listing says"]),
    ("someone/else", ["the card's base_model names someone/else, not " + BASE]),
])
def test_card_notes_name_what_is_wrong(base_model, expected):
    """A card's base_model as a string, a list (with malformed entries), a mapping or nothing: each named in words."""
    assert is_repo_id(BASE)
    assert _card_notes(CardHead("0" * 40, False, 0, base_model, None), BASE) == expected
