"""OSV records of a derivative still carrying what its base changed (tracker/family/derivative_records.py): a
quantization quantized from the base's old chat template gets a record on its own repo from its first commit,
fixed when a re-upload picks up the base's fixed template; the record is served by the OSV API, written in the
zip export, valid OSV, and analysed in the BOM of a revision on either side of the fix."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import jsonschema
import pytest

from feeds.osv.database import OsvDatabase
from feeds.osv.queries import parse_json_query
from tests.support.derivative_repos import AWQ, BASE, FINETUNE, GGUF, REUPLOADED, following_app, write_family, write_reuploads
from tracker.advisories.own import own_classes
from tracker.cli.app import App
from tracker.family.derivative_records import CLASS_ID, Window, derivative_record, windows
from tracker.family.lineage import PartLineage
from tracker.pins.bom import stored_model
from tracker.standins.replay.control import BUNDLED_ROOT, ReplayServer

pytestmark = pytest.mark.postgres
NOW = datetime(2026, 12, 5, tzinfo=UTC)
SCHEMA = Path(__file__).resolve().parents[1] / "fixtures" / "osv" / "osv-schema.json"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[ReplayServer]:
    write_family(tmp_path / "family")
    write_reuploads(tmp_path / "family")
    server = ReplayServer(roots=[BUNDLED_ROOT, tmp_path / "family"])
    server.set_head(BASE, 2)  # before the template fix
    server.set_head(GGUF, 1)
    server.set_head(REUPLOADED, 1)  # quantized from the old template
    with server:
        yield server


@pytest.fixture
def app(served: ReplayServer, database_url: str) -> Iterator[App]:
    with following_app(served.endpoint, database_url) as app:
        yield app


def _poll(app: App) -> None:
    for outcome in app.poller.poll():
        assert not outcome.failed, outcome.error


def _records(app: App, repo_id: str) -> list[dict]:
    return [o.record for o in app.store.advisories.own(repo_id) if o.class_id == CLASS_ID]


def _osv_ids(app: App, repo_id: str, sha: str) -> set[str]:
    """What POST /v1/query answers for `pkg:huggingface/REPO@SHA` (the API's own database and query parser)."""
    answer = OsvDatabase(app.store).query(parse_json_query({"package": {"purl": f"pkg:huggingface/{repo_id}@{sha}"}},
                                                           app.settings.hub.endpoint), None)
    return {v["id"] for v in answer.get("vulns", [])}


def test_a_derivative_behind_its_base_fix_gets_a_record_closed_when_it_picks_the_fix_up(
        served: ReplayServer, app: App, tmp_path: Path) -> None:
    """Quantized from the old template, the derivative gets a record on its own repo once the base fixes its
    template: introduced at its first commit, related to the base change; a commit that keeps the old template stays
    in the range; the re-upload with the fixed template is its `fixed`. The same record (id, `published`) throughout,
    valid OSV, found by the API at the affected commits only, in the zip export, and analysed in the BOM of a
    revision on each side of the fix. A copy that never picks it up keeps an open record; one that carries the fix
    (re-indented) gets none for its template."""
    validator = jsonschema.Draft202012Validator(json.loads(SCHEMA.read_text()),
                                                format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    _poll(app)
    assert _records(app, REUPLOADED) == []  # the base has not changed anything yet
    served.set_head(BASE, 3)  # the template fix
    _poll(app)
    base_fix = served.head_sha(BASE)
    (opened,) = _records(app, REUPLOADED)
    (first,) = [r.sha for r in app.store.history.list_revisions(REUPLOADED)]
    ours = opened["database_specific"]["hubwatch"]
    assert opened["affected"][0]["ranges"][0]["events"] == [{"introduced": first}]
    assert (ours["part"], ours["base_repo_id"], ours["base_fix_sha"], ours["severity"]) == ("chat_template", BASE, base_fix, "medium")
    assert ours["base_fix_title"] == "Update tokenizer_config.json"
    assert opened["affected"][0]["package"]["name"].endswith(f"/{REUPLOADED}")
    modified = opened["modified"]
    _poll(app)
    assert _records(app, REUPLOADED) == [opened]  # a pass that learns nothing new rewrites nothing

    served.set_head(REUPLOADED, 3)  # a card touch-up, then the re-upload with the fixed template
    _poll(app)
    first_sha, card_sha, fixed_sha = [r.sha for r in reversed(app.store.history.list_revisions(REUPLOADED))]
    (closed,) = _records(app, REUPLOADED)
    assert closed["id"] == opened["id"] and closed["published"] == opened["published"] and closed["modified"] >= modified
    assert closed["affected"][0]["ranges"][0]["events"] == [{"introduced": first_sha}, {"fixed": fixed_sha}]
    (row,) = [o for o in app.store.advisories.own(REUPLOADED) if o.class_id == CLASS_ID]
    assert (row.fixed_sha, row.last_affected_sha, row.modified) == (fixed_sha, None, closed["modified"])

    assert opened["id"] in _osv_ids(app, REUPLOADED, first_sha) and opened["id"] in _osv_ids(app, REUPLOADED, card_sha)
    assert opened["id"] not in _osv_ids(app, REUPLOADED, fixed_sha)
    served_record = OsvDatabase(app.store).vuln(opened["id"], "https://hubwatch.example.org")
    assert served_record is not None and served_record["database_specific"]["kind"] == CLASS_ID
    exported = {r["id"]: r for r in OsvDatabase(app.store).records_since(None)}
    assert exported[opened["id"]]["affected"] == served_record["affected"]
    for record in [served_record, *(r for r in exported.values() if r["database_specific"]["kind"] == CLASS_ID)]:
        assert [e.message for e in validator.iter_errors(record)] == [], record["id"]

    states = {}
    for sha in (card_sha, fixed_sha):
        revision = app.store.history.find_revision(REUPLOADED, sha)
        states[sha] = {r["id"]: state for r, state, _ in stored_model(app.store, revision).analysed}
    assert states == {card_sha: {opened["id"]: "exploitable"}, fixed_sha: {opened["id"]: "resolved"}}

    (awq,) = _records(app, AWQ)
    assert awq["affected"][0]["ranges"][0]["events"] == [{"introduced": app.store.history.list_revisions(AWQ)[0].sha}]
    assert not [r for r in _records(app, FINETUNE) if r["database_specific"]["hubwatch"]["part"] == "chat_template"]


# -- the windows of a derivative's history, one part against one base change --------------------------------------

BEHIND = PartLineage("behind", "m0", behind=1, missing=("F",))
CARRIES = PartLineage("carries", "F")
DIVERGED = PartLineage("diverged")


@pytest.mark.parametrize(("states", "gone", "expected"), [
    ([BEHIND, BEHIND, CARRIES], False, [("c0", "c2", None)]),
    ([BEHIND, BEHIND], False, [("c0", None, None)]),
    ([BEHIND, BEHIND], True, [("c0", None, "c1")]),
    ([CARRIES, BEHIND, DIVERGED], False, [("c1", None, "c1")]),
    ([BEHIND, CARRIES, BEHIND], False, [("c0", "c1", None), ("c2", None, None)]),
    ([BEHIND, PartLineage("absent"), BEHIND], False, [("c0", None, "c0"), ("c2", None, None)]),
    ([BEHIND, PartLineage("behind", "F", behind=1, missing=("G",))], False, [("c0", "c1", None), ("c1", None, None)]),
    ([CARRIES, DIVERGED], True, []),
])
def test_windows(states: list[PartLineage], gone: bool, expected: list[tuple]) -> None:
    """`fixed` where the derivative's part is the base's from that change on; `last_affected` (never beside `fixed`)
    where it stops matching the old one without matching the new (diverged, gone from its files) or the derivative is
    gone from the Hub; open while its newest commit still carries it; carried again later: a second window."""
    chain = [(f"c{i}", {"chat_template": state}) for i, state in enumerate(states)]
    found = [(w.introduced, w.fixed, w.last_affected) for w in windows(chain, gone)]
    assert found == expected
    assert all(not (w.fixed and w.last_affected) for w in windows(chain, gone))


def test_a_base_record_closed_by_the_change_is_related_and_sets_the_severity() -> None:
    """The base's own record fixed by the change the derivative misses (a stop token dropped, then restored) is
    `related`, and its higher severity and CVSS vector are the derivative record's."""
    base_record = {"id": "x_HUBWATCH-base-stop", "database_specific": {"hubwatch": {"class": "stop-token-dropped",
                                                                                     "severity": "high"}}}
    window = Window("stop_tokens", "F" * 40, "a" * 40, "m" * 40, "a" * 40)
    record = derivative_record("org/copy", BASE, window, hub_url="https://huggingface.co", at=NOW, titles={},
                               base_records=[base_record])
    assert record["related"] == ["x_HUBWATCH-base-stop"]
    assert record["database_specific"]["hubwatch"]["severity"] == "high"
    assert record["severity"] == [{"type": "CVSS_V3", "score": own_classes()["stop-token-dropped"].cvss}]
    plain = derivative_record("org/copy", BASE, window, hub_url="https://huggingface.co", at=NOW, titles={})
    assert "related" not in plain and plain["database_specific"]["hubwatch"]["severity"] == "medium"
    assert plain["id"] == record["id"]  # the id names the window, not what it is related to
