"""`last_affected` on hubwatch's own records: a repo that goes gone or disabled will show no later commit, so each
record still open there gets its branch head as `last_affected` (never beside a `fixed`), valid OSV, matched by the
API as OSV's GIT rule says; when the repo answers again the range is open again (its later commits may be affected)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from feeds.osv.database import OsvDatabase
from feeds.osv.queries import ModelQuery
from tests.support.osv_records import at, custom_code, dangerous_pickle, plant, record_for
from tracker.cli.app import App

pytestmark = pytest.mark.postgres
BROKEN = "hubwatch-tests/broken-model"
SCHEMA = Path(__file__).resolve().parents[1] / "fixtures" / "osv" / "osv-schema.json"


@pytest.fixture(autouse=True)
def no_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_TOKEN", raising=False)


def _ids(app: App, sha: str) -> set[str]:
    return {v["id"] for v in OsvDatabase(app.store).query(ModelQuery(BROKEN, sha), None).get("vulns", [])}


@pytest.mark.parametrize("hub_state", ["deleted", "disabled"])
def test_a_repo_gone_or_disabled_ends_its_open_records_at_its_last_commit(app: App, replay, hub_state: str) -> None:
    validator = jsonschema.Draft202012Validator(json.loads(SCHEMA.read_text()),
                                                format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    replay.set_head(BROKEN, 1)
    app.store.watches.add_watch(BROKEN, "main", 900)
    app.poller.poll()
    replay.set_head(BROKEN, 2)
    [outcome] = app.poller.poll()
    assert outcome.status == "ingested"
    first, head = [r.sha for r in reversed(app.store.history.list_revisions(BROKEN))]
    ids = {(BROKEN, r.sha): r.id for r in app.store.history.list_revisions(BROKEN)}
    when = at("2026-11-01T10:00:00")
    # open while config.json is there (a file record's range stays open while its file is in the repo)
    opened, fixed = plant(app.store, [record_for(BROKEN, first, dangerous_pickle("config.json"), at=when),
                                      record_for(BROKEN, first, custom_code(), at=when, fixed_sha=head)], ids)
    still_open = _ids(app, head)  # the planted open record, and any the ingest itself wrote
    assert opened.id in still_open and fixed.id not in still_open

    replay.set_state(BROKEN, hub_state)
    [outcome] = app.poller.poll()
    assert outcome.failed and outcome.repo_state in ("gone", "disabled")
    rows = {o.id: o for o in app.store.advisories.own(BROKEN)}
    ended = rows[opened.id]
    assert ended.record["affected"][0]["ranges"][0]["events"] == [{"introduced": first}, {"last_affected": head}]
    assert ended.last_affected_sha == head and ended.record["modified"] > opened.record["modified"]
    assert {rows[i].last_affected_sha for i in still_open} == {head}
    assert rows[fixed.id].record == fixed.record  # a fixed record keeps its `fixed` and nothing else
    for record_id in rows:
        served = OsvDatabase(app.store).vuln(record_id, None)
        assert [e.message for e in validator.iter_errors(served)] == []
        events = served["affected"][0]["ranges"][0]["events"]
        assert not ({"fixed", "last_affected"} <= {k for e in events for k in e})
    assert _ids(app, head) == still_open and opened.id in _ids(app, first)  # the last affected commit is affected
    [outcome] = app.poller.poll()  # the same state again: nothing rewritten
    assert app.store.advisories.own(BROKEN) and {o.id: o.record for o in app.store.advisories.own(BROKEN)}[opened.id] == ended.record

    replay.set_state(BROKEN, "active")
    replay.set_head(BROKEN, 3)
    [outcome] = app.poller.poll()
    assert outcome.status == "ingested" and outcome.repo_state == "active"
    newest = app.store.history.list_revisions(BROKEN)[0].sha
    reopened = {o.id: o for o in app.store.advisories.own(BROKEN)}[opened.id]
    assert reopened.record["affected"][0]["ranges"][0]["events"] == [{"introduced": first}]
    assert reopened.last_affected_sha is None and "last_affected_sha" not in reopened.record["database_specific"]["hubwatch"]
    assert opened.id in _ids(app, newest)


def test_a_fix_seen_after_the_end_replaces_last_affected() -> None:
    """A record ended at a gone repo's head whose file is then seen removed: `fixed` replaces `last_affected` (OSV: the
    two never in one range)."""
    from tracker.advisories.own import close_record
    from tracker.revision.snapshot import Snapshot

    record = record_for(BROKEN, "a" * 40, dangerous_pickle("model.bin"), at=at("2026-11-01T10:00:00"))
    record["affected"][0]["ranges"][0]["events"].append({"last_affected": "b" * 40})
    record["database_specific"]["hubwatch"].update({"last_affected_sha": "b" * 40, "last_affected_because": "gone"})
    closed = close_record(record, Snapshot(repo_id=BROKEN, sha="c" * 40), "https://huggingface.co", at("2026-11-02T10:00:00"))
    assert closed is not None
    assert closed["affected"][0]["ranges"][0]["events"] == [{"introduced": "a" * 40}, {"fixed": "c" * 40}]
    assert "last_affected_sha" not in closed["database_specific"]["hubwatch"]
