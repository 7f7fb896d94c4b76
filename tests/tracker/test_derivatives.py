"""A base's family followed end to end: the replay's listing filter, the lineage of each derivative's parts,
the reach and caught-up events, the bad derivatives named, and the cost in Hub requests."""

from __future__ import annotations

import pytest

from tests.support.derivative_repos import AWQ, BASE, FINETUNE, GATED, GGUF, MALFORMED, following_app, write_family
from tests.support.settings import settings_for
from tracker.cli.app import App
from tracker.standins.replay.control import BUNDLED_ROOT, ReplayServer


@pytest.fixture
def served(tmp_path):
    write_family(tmp_path / "family")
    server = ReplayServer(roots=[BUNDLED_ROOT, tmp_path / "family"])
    server.set_head(BASE, 2)  # before the template fix
    server.set_head(GGUF, 1)  # quantized from the old template
    with server:
        yield server


@pytest.fixture
def app(served, database_url):
    with following_app(served.endpoint, database_url) as app:
        yield app


def _poll(app: App) -> None:
    [outcome] = app.poller.poll()
    assert not outcome.failed, outcome.error


def _parts(app: App) -> dict[str, dict[str, str]]:
    tree = app.store.derivatives.tree(BASE)
    return {row["repo_id"]: {p: s["status"] for p, s in row["parts"].items()} for row in tree["derivatives"]}


def test_listing_filter_finds_the_family_by_relation(served):
    """The replay answers huggingface_hub's `base_model:<relation>:<id>` filter, most downloaded first."""
    from huggingface_hub import HfApi

    api = HfApi(endpoint=served.endpoint)
    quantized = [m.id for m in api.list_models(filter=f"base_model:quantized:{BASE}", sort="downloads", limit=10)]
    assert quantized == [GGUF, AWQ, GATED, MALFORMED]
    finetunes = [m.id for m in api.list_models(filter=f"base_model:finetune:{BASE}")]
    assert finetunes == ["other/Llama-3.1-8B-Instruct-from-elsewhere", FINETUNE]  # by id without a sort


def test_first_pass_records_lineage_and_names_bad_derivatives(app, served):
    """Each derivative's template matches the base's head or not; gated and malformed ones are named, the rest checked."""
    _poll(app)
    parts = _parts(app)
    assert parts[GGUF]["chat_template"] == "carries" and parts[AWQ]["chat_template"] == "carries"
    assert parts[FINETUNE]["chat_template"] == "diverged"  # its template is the fix, not stored yet
    assert parts[AWQ]["generation"] == "carries" and parts[FINETUNE]["generation"] == "diverged"
    report = app.store.derivatives.get_follow(BASE).last_report
    problems = "\n".join(report["problems"])
    assert f"{GATED}: gated" in problems
    assert f"{MALFORMED}: the card's base_model holds 1 malformed entry (42)" in problems
    assert report["checked"] == 5 and report["followed"] == 6


def test_base_fix_is_announced_with_who_carries_it_and_a_reupload_catches_up(app, served):
    """The template fix reaches the loose copy only; the GGUF's re-upload is its own event."""
    _poll(app)
    served.set_head(BASE, 3)
    _poll(app)
    parts = _parts(app)
    assert parts[GGUF]["chat_template"] == "behind" and parts[AWQ]["chat_template"] == "behind"
    assert parts[FINETUNE]["chat_template"] == "carries"
    tree = app.store.derivatives.tree(BASE)
    fine = next(r for r in tree["derivatives"] if r["repo_id"] == FINETUNE)["parts"]["chat_template"]
    assert fine["exact"] is False
    titles = [e.title for e in app.store.history.list_events(BASE) if e.kind == "derivatives.reached"]
    assert titles == [f"{BASE}@{served.head_sha(BASE)[:12]} (chat template) reached 1 of 5 derivatives; 4 still behind"]
    served.advance(GGUF)
    _poll(app)
    assert _parts(app)[GGUF]["chat_template"] == "carries"
    caught = [e.title for e in app.store.history.list_events(BASE) if e.kind == "derivative.caught_up"]
    assert caught == [f"{GGUF} now carries the chat template of {BASE}@{served.head_sha(BASE)[:12]}"]
    # SQLite does not hold a string to its column's length; PostgreSQL refuses an event id over 64 characters.
    assert all(len(e.event_id) <= 64 for e in app.store.history.list_events(BASE))


def test_later_pass_costs_one_request_per_unmoved_derivative(app, served):
    """A pass where no derivative moved makes the listing requests and one head check per derivative."""
    _poll(app)
    served.reset_requests()
    _poll(app)
    family = [r for r in served.requests if not r.path.startswith(f"/api/models/{BASE}")]
    listing = [r for r in family if r.path == "/api/models"]
    assert len(listing) == 2
    assert len(family) - len(listing) == 6 and all("/tree/" not in r.path and "/resolve/" not in r.path for r in family)


def test_cli_watch_add_derivatives_then_tree(served, tmp_path, database_url):
    """`watch add --derivatives` follows the family; `poll` checks it; `tree --json` shows each part's lineage."""
    from tests.support.cli import cli_json, run_cli, write_config

    config = write_config(tmp_path / "hubwatch.toml", served.endpoint, database_url)
    added = run_cli("watch", "add", BASE, "--derivatives", "quantized", "--derivatives-limit", "2", config=config)
    assert added.returncode == 0 and "following" in added.stdout, added.stderr
    assert run_cli("poll", config=config).returncode == 0
    tree = cli_json("tree", BASE, config=config)
    assert [row["repo_id"] for row in tree["derivatives"]] == [GGUF, AWQ]  # the 2 most downloaded quantizations
    assert tree["derivatives"][0]["parts"]["chat_template"]["status"] == "carries"
    bad = run_cli("watch", "add", BASE, "--derivatives", "quantised", config=config)
    assert bad.returncode == 2 and "'quantised' is not a relation" in bad.stderr


@pytest.mark.parametrize(("value", "message"), [
    (["quantized", "forks"], "'forks' is not a relation"),
    (7, "must be a list of quantized, finetune, adapter, merge"),
])
def test_config_derivatives_are_checked(value, message):
    """`[[watch]] derivatives` takes relations only; a bad one names the setting."""
    from tracker.config import settings_from_mapping
    from tracker.errors import ConfigError

    with pytest.raises(ConfigError, match=message):
        settings_from_mapping({"watch": [{"repo": BASE, "derivatives": value}]}, env={}, source="test")
    good = settings_from_mapping({"watch": [{"repo": BASE, "derivatives": ["merge"], "derivatives_limit": 5}]}, env={}, source="t")
    assert (good.watch[0].derivatives, good.watch[0].derivatives_limit) == (("merge",), 5)


def test_a_family_followed_after_the_first_poll_is_checked_once_the_cached_list_expires(served, database_url):
    """The poller reads which bases are followed at most every FOLLOWED_BASES_TTL_S (an unchanged poll stays
    one UPDATE); a family followed meanwhile gets its pass on the first poll after that."""
    from tests.support.clock import T0, FakeClock
    from tracker.polling.poller import FOLLOWED_BASES_TTL_S

    clock = FakeClock(T0)
    app = App(settings_for(served.endpoint, database_url), clock=clock)  # type: ignore[arg-type]
    try:
        app.store.watches.add_watch(BASE, "main", 900)
        _poll(app)
        app.store.derivatives.follow(BASE, ("quantized", "finetune"), 100)
        _poll(app)
        assert app.store.derivatives.tree(BASE)["derivatives"] == []  # the cached list: not followed yet
        clock.advance(FOLLOWED_BASES_TTL_S)
        _poll(app)
        assert GGUF in _parts(app)
    finally:
        app.store.engine.dispose()


def test_parts_stored_by_an_older_parts_version_are_recomputed_without_hub_requests(app, served):
    """After an upgrade, an unmoved derivative whose files are in the blob store gets its parts computed
    again from them (its head check only), so the tree does not turn `diverged`."""
    from sqlmodel import select

    from storage.models.derivatives import Derivative
    from tracker.family.lineage import PARTS_VERSION

    _poll(app)
    before = _parts(app)[AWQ]
    with app.store.derivatives.session() as s:
        row = s.exec(select(Derivative).where(Derivative.repo_id == AWQ)).one()
        row.parts = {k: {**v, "version": 1, "digest": "old-form", "loose": "old-form"} for k, v in row.parts.items()}
        s.add(row)
        s.commit()
    served.reset_requests()
    _poll(app)
    assert _parts(app)[AWQ] == before
    stored = next(d for d in app.store.derivatives.derivatives(BASE) if d.repo_id == AWQ).parts
    assert {v["version"] for v in stored.values()} == {PARTS_VERSION} and "old-form" not in str(stored)
    mine = [r for r in served.requests if AWQ in r.path]
    assert mine and all("/tree/" not in r.path and "/resolve/" not in r.path for r in mine)
