"""service.py end to end: a real store, the OSV fake over real HTTP, revisions written with their advisory
rows in one transaction, OSV failures that leave the rest of the revision in place, the daily re-check."""

from __future__ import annotations

import json
import zipfile
from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from storage.event_log import NewEvent
from storage.front import Storage
from storage.history import NewChange, NewFile, NewRevision
from storage.kinds import ADVISORY_PUBLISHED
from tracker.advisories.osv import OsvClient
from tracker.advisories.rules import default_rules
from tracker.advisories.service import (
    AdvisoryService,
    RevisionCheck,
)
from tracker.differs import diff_snapshots
from tracker.revision.snapshot import Snapshot
from tracker.standins.osv import OsvFake, bundled_records

from .kit import T0, Sleeps, blob_oid, moved_fix, real, snapshot

HUB = "https://huggingface.co"
REPO = "meta-llama/Llama-3.1-8B-Instruct"
LLAMA = {
    "config.json": real("differs/llama-3.1-8b-instruct/config.json"),
    "generation_config.json": real("differs/llama-3.1-8b-instruct/generation_config.json"),
    "chat_template.jinja": real("chat_templates/meta-llama-Llama-3.2-3B-Instruct/chat_template.jinja"),
}
SHAS = [str(n) * 40 for n in range(1, 10)]


def service_for(store: Storage, fake: OsvFake, sleeps: Sleeps, clock, **kwargs) -> AdvisoryService:
    client = OsvClient(fake.endpoint, timeout_s=5, max_attempts=2, backoff_s=1, max_pages=3, sleep=sleeps)
    return AdvisoryService(store, client, hub_url=HUB, clock=clock, **kwargs)


@pytest.fixture
def service(store, fake, sleeps, clock) -> Iterator[AdvisoryService]:
    svc = service_for(store, fake, sleeps, clock)
    yield svc
    svc.close()


def new_revision(snap: Snapshot, parent_sha: str | None, changes=()) -> NewRevision:
    """What the ingest writes for a snapshot (files, blobs, changes, the revision event)."""
    return NewRevision(
        repo_id=snap.repo_id, sha=snap.sha, parent_sha=parent_sha, branch="main", committed_at=T0, title="Update",
        message="", authors=["someone"], is_baseline=parent_sha is None,
        files=[NewFile(f.path, f.oid, f.size, "files", f.lfs_sha256, f.lfs_size, f.path in snap.contents) for f in snap.files.values()],
        blobs={blob_oid(data): data for data in snap.contents.values()}, weight_files=[],
        changes=[NewChange(c.kind.value, c.path, c.summary, c.severity.value, c.structural, c.security, c.detail) for c in changes],
        events=[NewEvent(f"rev-{snap.sha}", "revision.ingested", "t", "info")],
    )


def ingest(store: Storage, service: AdvisoryService, snap: Snapshot, parent: Snapshot | None = None, extra=()) -> RevisionCheck:
    """The lead's wiring in miniature: diff, check (network) before the one write, rows in its transaction."""
    watch = store.watches.get_watch(snap.repo_id) or store.watches.add_watch(snap.repo_id, "main", 900)
    changes = diff_snapshots(parent, snap) if parent is not None else []
    check = service.check_revision(snap.repo_id, snap.sha, snap, parent, changes, "Update")
    store.history.save_revision(new_revision(snap, parent.sha if parent else None, changes), watch_id=watch.id,
                        extra_writes=[check.write, *extra])
    return check


def llama(sha: str, **extra) -> Snapshot:
    return snapshot({**LLAMA, **extra.pop("files", {})}, sha=sha, repo_id=REPO, **extra)


def count(store: Storage, table: str) -> int:
    with store.engine.connect() as conn:
        return conn.exec_driver_sql(f"SELECT COUNT(*) FROM {table}").scalar()


def advisory_events(store: Storage) -> list:
    return [e for e in store.history.list_events() if e.kind == ADVISORY_PUBLISHED]


def test_revision_lands_with_facts_matches_and_advice(store, service, fake):
    """A baseline: facts, OSV matches of transformers 4.42.3, advice and the record cache, no events."""
    check = ingest(store, service, llama(SHAS[0]))
    revision = store.history.find_revision(REPO, SHAS[0])
    report = service.report(REPO, revision)
    assert report["advice"]["sentence"] == "to load this safely you need transformers >= 5.10.0"
    assert report["advice"]["package_sentence"].startswith(
        "for any model: transformers >= 5.10.0, no release fixes PYSEC-2025-211; torch >= 2.10.0"
    )
    matched = {m["advisory"]: m for m in report["osv_matches"]}
    assert (matched["PYSEC-2025-211"]["status"], matched["PYSEC-2025-211"]["relevant"]) == ("affected", False)
    assert matched["PYSEC-2025-211"]["relevance"] == (
        "not relevant to this model: about Perceiver models; this revision has model_type llama"
    )
    assert matched["PYSEC-2024-227"]["status"] == "affected" and matched["PYSEC-2024-227"]["verdict"] == "repo"
    assert matched["GHSA-qq3j-4f4f-9583"]["verdict"] == "runtime"
    assert matched["PYSEC-2024-227"]["reason"] == (
        "transformers 4.42.3 (config.json:transformers_version, generation_config.json:transformers_version)"
    )
    assert report["pending"] is None and check.pending is None
    assert count(store, "osv_record") == 21  # every transformers and torch record (advice), fetched once each
    assert advisory_events(store) == []  # a first look is not news
    assert fake.counts() == {"querybatch": 1, "vulns": 21}


def test_cached_records_are_not_fetched_again(store, service, fake):
    """The second revision asks querybatch once and fetches no record whose `modified` is unchanged."""
    first = llama(SHAS[0])
    ingest(store, service, first)
    fake.reset_requests()
    ingest(store, service, llama(SHAS[1], files={"README.md": "# Llama\n"}), parent=first)
    assert fake.counts() == {"querybatch": 1}


def test_security_change_publishes_an_own_advisory_in_the_revision_transaction(store, service):
    """Pickle weights added: an x_HUBWATCH record and its advisory.published event land with the revision."""
    first = llama(SHAS[0])
    ingest(store, service, first)
    check = ingest(store, service, llama(SHAS[1], lfs={"original/consolidated.00.pth": "pth"}), parent=first)
    [record] = check.own
    assert record["database_specific"]["hubwatch"]["class"] == "pickle-added"
    [own] = service.db.own(REPO)
    assert own.revision_id == store.history.find_revision(REPO, SHAS[1]).id and own.record == record
    [event] = [e for e in advisory_events(store) if e.payload["source"] == "hubwatch"]
    assert event.revision_id == own.revision_id and event.sha == SHAS[1] and event.severity == "critical"
    # pickle weights bring torch's checkpoint advisory into the advice, and it is announced
    assert check.advice.sentence.startswith("to load this safely you need transformers >= 5.10.0 (torch >= 2.10.0)")
    # and the general transformers deserialization advisories, which concern every repo with pickle files
    announced = {e.payload["advisory"] for e in advisory_events(store) if e.payload["source"] == "osv"}
    assert announced == {"GHSA-63cw-57p8-fm3p", "GHSA-3863-2447-669p", "GHSA-v68g-wm8c-6x7j"}


def test_a_failed_write_leaves_no_advisory_row(store, service):
    """The advisory rows share the revision's transaction: a later failing write rolls all of them back."""

    def fail(session, revision):
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        ingest(store, service, llama(SHAS[0]), extra=[fail])
    assert store.history.list_revisions(REPO) == []
    assert [count(store, t) for t in ("advisory_facts", "advisory_link", "osv_record", "advisory_state")] == [0, 0, 0, 0]


@pytest.mark.parametrize(
    ("fault", "params", "reason"),
    [
        ("status", {"status": 503}, "POST /v1/querybatch answered 503 (2 attempts)"),
        ("slow", {"delay_s": 30}, "POST /v1/querybatch timed out (2 attempts)"),
        ("malformed", {}, "POST /v1/querybatch: the answer is not valid JSON (41 bytes; "),
        ("truncated", {}, "POST /v1/querybatch: the answer was cut off ("),
        ("page_forever", {}, "OSV was still paging after 3 pages for "),
    ],
)
def test_osv_trouble_leaves_the_revision_whole_and_pending(store, fake, sleeps, clock, fault, params, reason):
    """OSV down, slow, malformed, cut or paging forever: the revision and its facts land, the reason is
    recorded, and the revision is asked again later."""
    client = OsvClient(fake.endpoint, timeout_s=0.3, max_attempts=2, backoff_s=1, max_pages=3, sleep=sleeps)
    service = AdvisoryService(store, client, hub_url=HUB, clock=clock)
    fake.inject(fault, path="querybatch", times=100, **params)
    check = ingest(store, service, llama(SHAS[0]))
    assert check.pending.startswith(reason)
    revision = store.history.find_revision(REPO, SHAS[0])
    report = service.report(REPO, revision)
    assert report["pending"].startswith(reason)
    assert report["facts"]["dependencies"][0]["version"] == "4.42.3"
    assert [p.revision_id for p in service.db.pending()] == [revision.id]
    fake.clear_faults()
    outcome = service.retry_pending()
    assert outcome.pending_cleared == 1 and service.db.pending() == []
    assert service.report(REPO, revision)["osv_matches"]


def test_osv_down_at_ingest_keeps_advice_from_the_cache(store, service, fake):
    """With OSV down on the second revision, advice still comes from cached records and says so."""
    first = llama(SHAS[0])
    ingest(store, service, first)
    fake.inject("status", status=503, times=100)
    check = ingest(store, service, llama(SHAS[1], files={"README.md": "# Llama\n"}), parent=first)
    assert check.advice.notes[0] == "from cached advisories only: POST /v1/querybatch answered 503 (2 attempts)"
    assert check.advice.packages[0].floor == ">= 5.10.0"
    assert check.new.links is None  # links of the revision are not guessed
    assert advisory_events(store) == []


def test_a_broken_rule_table_does_not_lose_the_revision(store, fake, sleeps, clock):
    """An advisory bug (here: a rule table that cannot be used) becomes the pending reason."""
    service = service_for(store, fake, sleeps, clock, rules=[object()])
    check = ingest(store, service, llama(SHAS[0]))
    assert check.pending.startswith("advisory check failed: AttributeError: ")
    assert store.history.find_revision(REPO, SHAS[0]).sha == SHAS[0]


def test_recheck_with_nothing_new_costs_one_request(store, service, fake):
    """A daily re-check of an unchanged repo: one querybatch, no detail fetch, no event."""
    ingest(store, service, llama(SHAS[0]))
    fake.reset_requests()
    outcome = service.recheck()
    assert (outcome.repos, outcome.querybatch_requests, outcome.detail_fetches, outcome.events) == (1, 1, 0, [])
    assert fake.counts() == {"querybatch": 1}


def test_new_advisory_is_announced_for_an_unchanged_repo(store, sleeps, clock):
    """An advisory published after the repo was ingested: the re-check fetches it and announces it once."""
    held_back = "PYSEC-2026-3929"
    with OsvFake([r for r in bundled_records() if r["id"] != held_back]) as fake:
        service = service_for(store, fake, sleeps, clock)
        ingest(store, service, llama(SHAS[0]))
        assert service.recheck().events == []
        fake.put(next(r for r in bundled_records() if r["id"] == held_back))
        fake.reset_requests()
        outcome = service.recheck()
        assert (outcome.querybatch_requests, outcome.detail_fetches, len(outcome.events)) == (1, 1, 1)
        [event] = advisory_events(store)
        assert event.payload["advisory"] == "GHSA-xrqw-3rrv-vx5w"
        assert event.title.startswith("Llama-3.1-8B-Instruct: advisory GHSA-xrqw-3rrv-vx5w: Transformers save_pretrained")
        assert event.payload["why"] == (
            "matches transformers 4.42.3 (repo)"
        )
        assert event.sha == SHAS[0] and event.security
        assert service.recheck().events == []  # told once
        revision = store.history.find_revision(REPO, SHAS[0])
        assert service.report(REPO, revision)["advice"]["packages"][0]["floor"] == ">= 5.10.0"


def test_modified_advisory_is_fetched_again_and_announced(store, service, fake):
    """OSV moves a record's fix: the re-check fetches that one record only, and announces the new version."""
    ingest(store, service, llama(SHAS[0]))
    fake.modify("PYSEC-2026-2289", "2026-12-01T08:00:00Z", affected=moved_fix(fake.record("PYSEC-2026-2289"), "5.3.1"))
    outcome = service.recheck()
    assert outcome.detail_fetches == 1 and len(outcome.events) == 1
    [event] = advisory_events(store)
    assert (event.payload["advisory"], event.payload["modified"]) == ("PYSEC-2026-2289", "2026-12-01T08:00:00Z")
    assert service.db.osv_records(["PYSEC-2026-2289"])[0].modified == "2026-12-01T08:00:00Z"


def test_withdrawn_advisory_stops_counting(store, service, fake):
    """OSV withdraws the chat-template advisory: the re-check learns it (querybatch leaves withdrawn records
    out, so the vanished id is fetched again), the floor falls, and no event is sent."""
    ingest(store, service, llama(SHAS[0]))
    fake.withdraw("PYSEC-2026-3929", "2026-12-02T00:00:00Z")
    outcome = service.recheck()
    assert outcome.events == []
    [row] = service.db.osv_records(["PYSEC-2026-3929"])
    assert row.withdrawn
    revision = store.history.find_revision(REPO, SHAS[0])
    report = service.report(REPO, revision)
    assert report["advice"]["packages"][0]["floor"] == ">= 5.3.0"
    assert "GHSA-xrqw-3rrv-vx5w" not in {m["advisory"] for m in report["osv_matches"]}


def test_recheck_while_osv_is_down_is_recorded_and_sends_nothing(store, service, fake):
    """A failed re-check changes no link and sends no event; the failure is recorded per repo."""
    ingest(store, service, llama(SHAS[0]))
    fake.inject("status", status=502, times=100)
    outcome = service.recheck()
    assert outcome.error == "POST /v1/querybatch answered 502 (2 attempts)"
    assert service.db.rechecks()[REPO].error == outcome.error
    assert advisory_events(store) == []


def test_unparseable_versions_do_not_stop_the_revision(store, service):
    """config.json says "latest": a readable reason; generation_config.json's version is still matched."""
    config = real("differs/llama-3.1-8b-instruct/config.json").decode().replace('"4.42.3"', '"latest"')
    check = ingest(store, service, llama(SHAS[0], files={"config.json": config}))
    assert [p.reason for p in check.facts.problems] == [
        "config.json:transformers_version: 'latest' is not a PEP 440 version; not checked against OSV"
    ]
    assert {m.version for m in check.matches} == {"4.42.3"}


def test_export_writes_an_osv_database(store, service, tmp_path, osv_schema):
    """Own records are exported one JSON file each, plus all.zip and a newest-first modified_id.csv."""
    first = llama(SHAS[0])
    ingest(store, service, first)
    second = llama(SHAS[1], lfs={"original/consolidated.00.pth": "pth"}, files={"modeling_llama.py": "import torch\n"})
    ingest(store, service, second, parent=first)
    written = service.export(tmp_path / "db")
    files = sorted(p.name for p in (tmp_path / "db" / "GIT").iterdir())
    ids = sorted(o.id for o in service.db.own())
    assert files == sorted([f"{i}.json" for i in ids] + ["all.zip", "modified_id.csv"])
    for path in written:
        if path.suffix == ".json":
            assert osv_schema.is_valid(json.loads(path.read_text()))
    with zipfile.ZipFile(tmp_path / "db" / "GIT" / "all.zip") as zf:
        assert sorted(zf.namelist()) == [f"{i}.json" for i in ids]
    lines = (tmp_path / "db" / "GIT" / "modified_id.csv").read_text().splitlines()
    assert sorted(line.split(",")[1] for line in lines) == ids


def test_pipeline_on_a_recorded_history(app, replay):
    """phi-2's real history through the pipeline: custom code and auto_map records, fixed when the
    remote code is removed; every revision checked as it landed, so a back-fill has nothing to do."""
    repo = "microsoft/phi-2"
    replay.set_head(repo, len(replay.commits(repo)))
    app.store.watches.add_watch(repo, "main", 900, backfill=10)
    app.poller.poll()
    service = app.advisories
    shas = [c.sha for c in replay.commits(repo)]
    own = sorted((o.class_id, shas.index(o.sha) + 1, shas.index(o.fixed_sha) + 1) for o in service.db.own(repo))
    assert own == [  # (class, introduced at commit n, fixed at commit n) of the five recorded commits
        ("auto-map", 2, 5), ("auto-map", 3, 5),
        ("custom-code", 2, 3), ("custom-code", 3, 5), ("custom-code", 4, 5),
    ]
    assert service.backfill([repo]) == 0  # the pipeline checked each revision as it landed


def test_default_rules_are_used_when_none_are_given(store, service):
    """The service judges with the bundled rule table unless told otherwise."""
    assert service.rules is None and len(default_rules()) == 11


def test_event_ids_are_stable(store, service, fake):
    """Re-running the same re-check on a fresh database yields the same event ids."""
    ingest(store, service, llama(SHAS[0]))
    fake.modify("PYSEC-2026-2289", "2026-12-01T08:00:00Z", affected=moved_fix(fake.record("PYSEC-2026-2289"), "5.3.1"))
    first = service.recheck().events
    assert len(first) == 1
    with store.engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM event WHERE kind = 'advisory.published'"))
        conn.execute(sa.text("DELETE FROM advisory_state WHERE advisory_key = 'PYSEC-2026-2289'"))
    assert service.recheck().events == first


def test_removing_what_an_own_advisory_is_about_publishes_its_fix(store, service):
    """Custom code added, then removed: the record gains a fixed event, announced as a notice."""
    first = llama(SHAS[0])
    ingest(store, service, first)
    with_code = llama(SHAS[1], files={"modeling_llama.py": "import torch\n"})
    ingest(store, service, with_code, parent=first)
    ingest(store, service, llama(SHAS[2]), parent=with_code)
    [own] = service.db.own(REPO)
    assert (own.class_id, own.sha, own.fixed_sha) == ("custom-code", SHAS[1], SHAS[2])
    titles = [(e.title, e.severity) for e in advisory_events(store) if e.payload["source"] == "hubwatch"]
    assert titles == [
        (f"Llama-3.1-8B-Instruct: {own.id}: custom Python code added or changed (fixed at {SHAS[2][:12]})", "notice"),
        (f"Llama-3.1-8B-Instruct: {own.id}: custom Python code added or changed", "critical"),
    ]


def test_recheck_due_time_follows_the_last_successful_recheck(store, service, clock):
    """Never re-checked: due now; after one, due an interval later (a failed one does not count)."""
    assert service.recheck_due_at(86400) == clock()
    ingest(store, service, llama(SHAS[0]))
    service.recheck()
    checked = clock()
    clock.advance(hours=3)
    assert service.recheck_due_at(86400) == checked.replace(day=checked.day + 1)


def test_ingests_stop_asking_osv_for_a_while_after_it_failed(store, service, fake, clock):
    """Once OSV failed an ingest, later ingests in the cool-down are not sent (marked pending with the
    reason); after the cool-down they ask again, and pending retries always ask."""
    fake.inject("status", status=503, times=100)
    first = ingest(store, service, llama(SHAS[0]))
    sent = len(fake.requests)
    second = ingest(store, service, llama(SHAS[1], files={"README.md": "# Llama\n"}))
    assert first.pending.startswith("POST /v1/querybatch answered 503")
    assert second.pending.startswith("not asked: OSV unreachable: POST /v1/querybatch answered 503")
    assert len(fake.requests) == sent
    fake.clear_faults()
    assert service.retry_pending().pending_cleared == 2  # retries ignore the cool-down
    clock.advance(seconds=301)
    third = ingest(store, service, llama(SHAS[2], files={"README.md": "# Llama 3\n"}))
    assert third.pending is None and len(fake.requests) > sent


def test_cosmetic_modification_is_stored_silently(store, service, fake):
    """OSV re-touches a record (new `modified`, reworded details, ranges unchanged): the record and the
    repo's state are updated, nothing is announced; a later fix move is announced once."""
    ingest(store, service, llama(SHAS[0]))
    fake.modify("PYSEC-2026-2289", "2026-12-01T08:00:00Z", details="Reworded by the database.")
    outcome = service.recheck()
    assert (outcome.detail_fetches, outcome.events) == (1, [])
    assert service.db.osv_records(["PYSEC-2026-2289"])[0].modified == "2026-12-01T08:00:00Z"
    assert service.db.told([REPO])[(REPO, "PYSEC-2026-2289")].modified == "2026-12-01T08:00:00Z"
    fake.modify("PYSEC-2026-2289", "2026-12-02T08:00:00Z", affected=moved_fix(fake.record("PYSEC-2026-2289"), "5.3.1"))
    assert len(service.recheck().events) == 1
    assert service.recheck().events == []


def test_model_type_change_makes_an_advisory_relevant_and_announces_it(store, service):
    """A Llama repo is not told about the Perceiver advisory; the revision that makes it a Perceiver is."""
    first = llama(SHAS[0])
    ingest(store, service, first)
    config = json.loads(LLAMA["config.json"])
    config.update(model_type="perceiver", architectures=["PerceiverForMaskedLM"])
    ingest(store, service, llama(SHAS[1], files={"config.json": json.dumps(config)}), parent=first)
    announced = {e.payload["advisory"]: e for e in advisory_events(store)}
    assert set(announced) == {"PYSEC-2025-211"}
    event = announced["PYSEC-2025-211"]
    assert event.sha == SHAS[1] and event.severity == "warning"
    assert event.payload["why"] == (
        "matches transformers 4.42.3 (repo); about Perceiver models: this revision has model_type perceiver"
    )
    report = service.report(REPO, store.history.find_revision(REPO, SHAS[1]))
    assert report["advice"]["sentence"] == (
        "to load this safely you need transformers >= 5.10.0; no release fixes transformers: PYSEC-2025-211"
    )
    assert [c["summary"] for c in report["fact_changes"]][:2] == [
        "model types: llama -> perceiver", "architectures: LlamaForCausalLM -> PerceiverForMaskedLM"]


def test_other_models_advisories_are_never_announced(store, service, fake):
    """A new advisory about another model reaches the package view of a Llama repo, not its events."""
    fake.withdraw("PYSEC-2024-228", "2026-11-01T00:00:00Z")
    ingest(store, service, llama(SHAS[0]))
    fake.put({**fake.record("PYSEC-2024-228"), "modified": "2026-12-01T00:00:00Z", "withdrawn": None})
    assert service.recheck().events == []
    report = service.report(REPO, store.history.find_revision(REPO, SHAS[0]))
    [maskformer] = [m for m in report["osv_matches"] if m["advisory"] == "PYSEC-2024-228"]
    assert (maskformer["status"], maskformer["relevant"]) == ("affected", False)


def test_an_unreadable_config_counts_scoped_advisories_without_announcing_them(store, service):
    """A revision whose config.json cannot be read: Perceiver-type advisories count for its advice (its
    model is unknown) but are not announced as news for it."""
    first = llama(SHAS[0])
    ingest(store, service, first)
    check = ingest(store, service, llama(SHAS[1], files={"config.json": "{not json"}), parent=first)
    # OSV's advisories are not news for it; the stop token config.json named is gone with it (hubwatch's own record)
    assert [e.payload["source"] for e in advisory_events(store)] == ["hubwatch"]
    assert advisory_events(store)[0].payload["class"] == "stop-token-dropped"
    [perceiver] = [b for b in check.advice.packages[0].unfixed if b.key == "PYSEC-2025-211"]
    assert perceiver.assumed and perceiver.relevance.endswith("this revision's model type is unknown, so it counts")
