"""PyTorch pickles through the whole pipeline on the replay server: data.pkl read by Range, verdicts as
changes and own records, tensor manifests for the estimator and the weights differ, bad files as notes on a
stored revision, and stored verdicts judged again when the rules change, without a Hub request."""

from __future__ import annotations

import json

import pytest

from tests.support.cli import run_cli
from tests.support.pickle_bytes import Member, calling, zip_bytes
from tests.support.pickle_repos import calling_fragment, sparse, tensor_pickle, torch_zip, whole, write_pickle_repo
from tests.support.served import serve
from tests.support.settings import settings_for
from tracker.cli.app import App
from tracker.formats.pickle_rules import RULES_VERSION
from tracker.standins.replay.control import ReplayServer

pytestmark = pytest.mark.postgres

REPO = "hubwatch-tests/pickle-model"
CONFIG = {"architectures": ["Net"], "model_type": "net", "hidden_size": 8, "num_hidden_layers": 2}
UNKNOWN = calling_fragment("somepkg", "thing", "x")
EVIL = calling_fragment("os", "system", "id")
OVER_CAP = whole(torch_zip(tensor_pickle() + bytes(33 * 2**20)))  # a data.pkl over its 32 MiB cap

COMMITS = [
    {"title": "initial", "files": {"config.json": CONFIG},
     "pickles": {"pytorch_model.bin": sparse(tensor_pickle(UNKNOWN))}},
    {"title": "grow a layer", "pickles": {"pytorch_model.bin": sparse(tensor_pickle(UNKNOWN, tensors=3), tensors=3)}},
    {"title": "add files", "pickles": {"original/consolidated.00.pth": sparse(tensor_pickle()),
                                       "extra/evil.bin": whole(torch_zip(tensor_pickle(EVIL)))}},
    {"title": "bad files", "pickles": {
        "bad/truncated.bin": whole(torch_zip(tensor_pickle())[:-40]),
        "bad/encrypted.bin": whole(zip_bytes([Member("archive/data.pkl", tensor_pickle(), flags=1),
                                              Member("archive/version", b"3\n")])),
        "bad/over-cap.bin": OVER_CAP,
        "bad/hidden.bin": whole(zip_bytes([Member("model/weights.txt", b"0.1 0.2"),
                                           Member("model/config.pkl", calling("os", "system", "id"), flags=1)]))}},
    {"title": "another file", "pickles": {"late/model.pt": sparse(tensor_pickle(), storage_bytes=300 * 2**20)}},
]


@pytest.fixture
def served(tmp_path):
    write_pickle_repo(tmp_path / "histories", REPO, COMMITS)
    with ReplayServer(roots=[tmp_path / "histories"]) as server:
        yield server


def _app(served, database_url, **sections) -> App:
    app = App(settings_for(served.endpoint, database_url, **sections))  # type: ignore[arg-type]
    return app


@pytest.fixture
def pickle_app(served, database_url):
    app = _app(served, database_url)
    app.store.watches.add_watch(REPO, "main", 900)
    yield app
    app.store.engine.dispose()


def _changes(app: App, sha: str) -> list:
    revision = app.store.history.find_revision(REPO, sha)
    return app.store.history.changes_by_revision([revision.id])[revision.id]


def _poll_to(app: App, server: ReplayServer, n: int):
    server.set_head(REPO, n)
    [outcome] = app.poller.poll()
    assert outcome.status == "ingested", outcome.error
    return outcome


def test_a_pickle_only_repo_gets_an_estimate_and_tensor_diffs(pickle_app, served):
    """The data.pkl of a 4 GB checkpoint is read by Range alone; its tensors feed the estimator and the weights differ."""
    _poll_to(pickle_app, served, 1)
    reads = [r for r in served.requests if "/resolve/" in r.path and r.path.endswith(".bin")]
    assert reads and all(r.range and r.status == 206 for r in reads)
    files = {f.path: f for f in pickle_app.hub.list_files(REPO, served.head_sha(REPO))}
    scan = pickle_app.store.history.read_file_scans([files["pytorch_model.bin"].content_id])[files["pytorch_model.bin"].content_id]
    assert scan.format == "pickle" and scan.result["verdict"] == "unknown" and scan.rules_version == str(RULES_VERSION)
    assert scan.bytes_read < files["pytorch_model.bin"].lfs_size / 100
    [baseline] = [c for c in _changes(pickle_app, served.head_sha(REPO)) if c.detail.get("baseline")]
    assert "pickle files: pytorch_model.bin (unknown: somepkg.thing)" in baseline.summary and baseline.security
    first = pickle_app.store.history.latest_estimate(REPO)
    assert first is not None and first[1].parameters_total == 64
    _poll_to(pickle_app, served, 2)
    changes = _changes(pickle_app, served.head_sha(REPO))
    grown = next(c for c in changes if c.kind == "weights" and "tensors added" in c.summary)
    assert "1 tensors added (layers.2.weight)" in grown.summary and grown.structural
    assert pickle_app.store.history.latest_estimate(REPO)[1].parameters_total == 96


def test_verdicts_become_changes_and_own_records(pickle_app, served):
    """Tensor rebuilds only: a notice and no record; os.system: critical, naming file, callable and place, with
    an own record and its event; the safe checkpoint is not a security change."""
    _poll_to(pickle_app, served, 2)
    _poll_to(pickle_app, served, 3)
    sha = served.head_sha(REPO)
    changes = {c.path: c for c in _changes(pickle_app, sha) if c.kind == "weights" and "status" in c.detail}
    safe = changes["original/consolidated.00.pth"]
    assert safe.severity == "notice" and not safe.security
    assert "pickle format, imports only tensor rebuilds" in safe.summary
    evil = changes["extra/evil.bin"]
    assert evil.severity == "critical" and evil.security
    assert "pickle imports a dangerous callable: os.system (archive/data.pkl, byte " in evil.summary
    records = [r for r in pickle_app.store.advisories.own(REPO) if r.sha == sha]
    assert [r.class_id for r in records] == ["pickle-dangerous-import"]
    assert records[0].record["database_specific"]["hubwatch"]["paths"] == ["extra/evil.bin"]
    titles = [e.title for e in pickle_app.store.history.list_events(limit=100)]
    assert any("pickle imports a dangerous callable (extra/evil.bin: os.system)" in t for t in titles)


def test_bad_files_are_notes_on_a_stored_revision(pickle_app, served):
    """A truncated zip, an entry claiming encryption, a data.pkl over its cap: notes on warnings (could not be
    checked; only partly checked where the pickle was read under a claim that may hide another), the revision
    stored, the poll ok; a zip that is no torch checkpoint is judged by the pickle it hides (critical)."""
    _poll_to(pickle_app, served, 1)
    _poll_to(pickle_app, served, 4)
    changes = {c.path: c for c in _changes(pickle_app, served.head_sha(REPO)) if "status" in c.detail}
    expect = {"bad/truncated.bin": ("could not be checked", "no end-of-central-directory record"),
              "bad/encrypted.bin": ("could not be fully checked", "archive/data.pkl claims encryption"),
              "bad/over-cap.bin": ("could not be checked", "over the 33,554,432-byte cap")}  # fmt: skip
    for path, (summary, says) in expect.items():
        change = changes[path]
        assert f"pickle format, {summary}" in change.summary and says in change.summary, change.summary
        assert change.severity == "warning" and change.security
    hidden = changes["bad/hidden.bin"]  # not a torch checkpoint, a flag claiming encryption: judged all the same
    assert hidden.severity == "critical" and "os.system (model/config.pkl" in hidden.summary, hidden.summary
    over_cap = [r for r in served.requests if r.path.endswith("bad/over-cap.bin")]
    assert over_cap and all(r.range for r in over_cap)  # the data.pkl itself was never asked for


def test_a_server_ignoring_range_is_a_note(pickle_app, served):
    """Range ignored: the stream is cut at the scan's budget, the file noted as not checked, the poll ok."""
    _poll_to(pickle_app, served, 4)
    served.ignore_range()
    _poll_to(pickle_app, served, 5)
    change = next(c for c in _changes(pickle_app, served.head_sha(REPO)) if c.path == "late/model.pt" and "status" in c.detail)
    assert "pickle format, could not be checked" in change.summary and change.severity == "warning"
    files = {f.path: f for f in pickle_app.hub.list_files(REPO, served.head_sha(REPO))}
    scan = pickle_app.store.history.read_file_scans([files["late/model.pt"].content_id])[files["late/model.pt"].content_id]
    assert scan.note and scan.bytes_read < files["late/model.pt"].lfs_size / 4


def test_show_json_carries_pickle_scans(pickle_app, served, database_url, tmp_path):
    """`show --json` gives each scanned pickle its verdict, imports, rules version, bytes read and note."""
    _poll_to(pickle_app, served, 3)
    config = tmp_path / "hubwatch.toml"
    config.write_text(f'[hub]\nendpoint = "{served.endpoint}"\n[storage]\nurl = "{database_url}"\n')
    result = run_cli("show", REPO, served.head_sha(REPO), "--json", config=config)
    assert result.returncode == 0, result.stderr
    files = {f["path"]: f for f in json.loads(result.stdout)["files"]}
    scan = files["extra/evil.bin"]["pickle_scan"]
    assert set(scan) == {"verdict", "imports", "rules_version", "bytes_read", "note"}
    assert scan["verdict"] == "dangerous" and scan["rules_version"] == str(RULES_VERSION) and scan["bytes_read"] > 0
    assert {"module": "os", "name": "system", "verdict": "dangerous"} in scan["imports"]
    assert files["original/consolidated.00.pth"]["pickle_scan"]["verdict"] == "safe"
    assert "pickle_scan" not in files["config.json"]


def test_stored_verdicts_are_judged_again_when_the_rules_change(pickle_app, served, database_url, tmp_path):
    """A rules file listing somepkg.thing dangerous: one critical event, one delivery, one own record, no Hub
    request; the same rules again announce nothing."""
    _poll_to(pickle_app, served, 1)
    pickle_app.store.subscriptions.add_subscription("https://hooks.example.com/x", "slack", min_severity="warning")
    rules = tmp_path / "rules.toml"
    rules.write_text('dangerous = ["somepkg"]\n')
    events_before = {e.event_id for e in pickle_app.store.history.list_events(limit=1000)}
    served.reset_requests()
    stricter = _app(served, database_url, scan={"pickle_rules": str(rules)})
    outcome = stricter.advisories.rejudge_pickles()
    assert served.requests == []
    assert outcome.scans == 1 and len(outcome.changed) == 1 and len(outcome.records) == 1
    new_events = [e for e in stricter.store.history.list_events(limit=1000) if e.event_id not in events_before]
    assert len(new_events) == 1 and new_events[0].severity == "critical"
    assert "(pytorch_model.bin: somepkg.thing)" in new_events[0].title
    assert len(stricter.store.outbox.list_deliveries()) == 1
    [record] = [r for r in stricter.store.advisories.own(REPO) if r.class_id == "pickle-dangerous-import"]
    assert record.record["database_specific"]["hubwatch"]["rules_version"] == stricter.settings.scan.rules.version
    files = {f.path: f for f in stricter.hub.list_files(REPO, served.head_sha(REPO))}
    cid = files["pytorch_model.bin"].content_id
    stored = stricter.store.history.read_file_scans([cid])[cid]
    assert stored.result["verdict"] == "dangerous" and stored.rules_version == stricter.settings.scan.rules.version
    again = _app(served, database_url, scan={"pickle_rules": str(rules)}).advisories.rejudge_pickles()
    assert (again.scans, again.events, again.records) == (0, [], [])
    assert len(stricter.store.outbox.list_deliveries()) == 1
    stricter.store.engine.dispose()


def test_feeds_advisories_and_outdated_name_the_file_and_callable(pickle_app, served, database_url, tmp_path):
    """The repo's feed, `advisories REPO --json` and `outdated --lock` each show extra/evil.bin and os.system."""
    _poll_to(pickle_app, served, 2)
    pinned = served.head_sha(REPO)
    _poll_to(pickle_app, served, 3)
    config = tmp_path / "hubwatch.toml"
    config.write_text(f'[hub]\nendpoint = "{served.endpoint}"\n[storage]\nurl = "{database_url}"\n')
    feed = run_cli("feed", REPO, config=config)
    assert feed.returncode == 0, feed.stderr
    assert "extra/evil.bin" in feed.stdout and "os.system" in feed.stdout
    advisories = run_cli("advisories", REPO, "--json", config=config)
    assert advisories.returncode == 0, advisories.stderr
    [record] = [r for r in json.loads(advisories.stdout)["own_advisories"]
                if r["database_specific"]["hubwatch"]["class"] == "pickle-dangerous-import"]
    assert record["summary"].endswith("(extra/evil.bin: os.system)")
    lock = tmp_path / "models.lock"
    lock.write_text(f'[[model]]\nrepo = "{REPO}"\nrevision = "{pinned}"\nbranch = "main"\n')
    behind = run_cli("outdated", "--lock", str(lock), "--fail-on", "critical", config=config)
    assert behind.returncode == 1, behind.stderr
    assert "extra/evil.bin" in behind.stdout and "os.system" in behind.stdout


def test_llamas_original_checkpoint_is_a_notice_in_the_bundled_history(app, replay):
    """The demo's Llama 3.1 consolidated.00.pth, tensors only, is "pickle format, imports only tensor rebuilds"
    at notice, with no own record, read with a sliver of its 16 GB; its 291 tensors are Meta's 8B model."""
    llama = "meta-llama/Llama-3.1-8B-Instruct"
    app.store.watches.add_watch(llama, "main", 900)
    for head in (5, 6):
        replay.set_head(llama, head)
        [outcome] = app.poller.poll()
        assert outcome.status == "ingested", outcome.error
    sha = replay.head_sha(llama)
    revision = app.store.history.find_revision(llama, sha)
    changes = app.store.history.changes_by_revision([revision.id])[revision.id]
    [pth] = [c for c in changes if c.path == "original/consolidated.00.pth" and "status" in c.detail]
    assert pth.severity == "notice" and not pth.security
    assert "pickle format, imports only tensor rebuilds" in pth.summary
    checkpoint = next(c for c in changes if c.path == "original/consolidated.00.pth" and "status" not in c.detail)
    assert "291 tensors added" in checkpoint.summary
    assert not [r for r in app.store.advisories.own(llama) if r.class_id.startswith("pickle")]
    files = {f.path: f for f in app.hub.list_files(llama, sha)}
    entry = files["original/consolidated.00.pth"]
    scan = app.store.history.read_file_scans([entry.content_id])[entry.content_id]
    assert scan.bytes_read < entry.lfs_size / 1000


def test_advisories_recheck_judges_stored_scans_again(pickle_app, served, database_url, tmp_path):
    """`hubwatch advisories recheck` with a changed rules file re-judges and says so; a second run says nothing; the
    file saved again with the callable safe withdraws the record and says so."""
    from tests.support.osv import osv_endpoint

    _poll_to(pickle_app, served, 1)
    rules = tmp_path / "rules.toml"
    rules.write_text('dangerous = ["somepkg.thing"]\n')
    config = tmp_path / "hubwatch.toml"
    config.write_text(f'[hub]\nendpoint = "{served.endpoint}"\n[storage]\nurl = "{database_url}"\n'
                      f'[osv]\napi_url = "{osv_endpoint()}"\n[scan]\npickle_rules = "{rules}"\n')
    first = run_cli("advisories", "recheck", config=config)
    assert first.returncode == 0, first.stderr
    assert f"judged 1 stored pickle scan(s) again under rules {RULES_VERSION}+" in first.stdout
    assert "1 verdict(s) changed, 1 advisory event(s)" in first.stdout
    again = run_cli("advisories", "recheck", config=config)
    assert again.returncode == 0 and "judged" not in again.stdout
    rules.write_text('safe = ["somepkg.thing"]\n')  # saved again: the callable reviewed and found harmless
    lenient = run_cli("advisories", "recheck", config=config)
    assert lenient.returncode == 0, lenient.stderr
    assert "1 verdict(s) changed" in lenient.stdout and "1 own record(s) withdrawn" in lenient.stdout


def test_a_verdict_judged_safe_again_withdraws_its_own_record_once(pickle_app, served, database_url, tmp_path):
    """somepkg.thing listed safe: the unknown record is withdrawn (OSV `withdrawn`), one notice event and one
    delivery announce it, it is no longer open; the same rules again announce nothing."""
    _poll_to(pickle_app, served, 1)
    _poll_to(pickle_app, served, 2)  # the changed pytorch_model.bin: an unknown record
    [record] = [r for r in pickle_app.store.advisories.own(REPO) if r.class_id == "pickle-unknown-import"]
    pickle_app.store.subscriptions.add_subscription("https://hooks.example.com/x", "slack", min_severity="notice")
    rules = tmp_path / "rules.toml"
    rules.write_text('safe = ["somepkg.thing"]\n')
    events_before = {e.event_id for e in pickle_app.store.history.list_events(limit=1000)}
    lenient = _app(served, database_url, scan={"pickle_rules": str(rules)})
    outcome = lenient.advisories.rejudge_pickles()
    assert (len(outcome.changed), outcome.records, outcome.withdrawn) == (2, [], [record.id])  # both revisions
    [new_event] = [e for e in lenient.store.history.list_events(limit=1000) if e.event_id not in events_before]
    assert new_event.severity == "notice" and f"withdrawn: judged again under pickle rules {RULES_VERSION}+" in new_event.title
    assert "pytorch_model.bin: safe" in new_event.title
    [delivery] = lenient.store.outbox.list_deliveries()
    assert delivery.event.event_id == new_event.event_id
    [withdrawn] = [r for r in lenient.store.advisories.own(REPO) if r.id == record.id]
    assert withdrawn.record["withdrawn"] == withdrawn.record["modified"] and "Withdrawn" in withdrawn.record["details"]
    assert record.id not in {r.id for r in lenient.store.advisories.open_own(REPO)}
    with serve(lenient.store) as server, server.client() as client:
        page = client.get(f"/repos/{REPO}/revisions/{served.head_sha(REPO)}").text
    assert record.id in page and f"(withdrawn {withdrawn.record['withdrawn']})" in page
    again = _app(served, database_url, scan={"pickle_rules": str(rules)}).advisories.rejudge_pickles()
    assert (again.scans, again.events, again.withdrawn) == (0, [], [])
    assert len(lenient.store.outbox.list_deliveries()) == 1
    lenient.store.engine.dispose()


def test_a_dangerous_verdict_judged_only_unknown_withdraws_the_dangerous_record(pickle_app, served, database_url,
                                                                                tmp_path):
    """Rules that made somepkg dangerous, then forgot it: the dangerous record is withdrawn, an unknown one stays."""
    _poll_to(pickle_app, served, 1)
    _poll_to(pickle_app, served, 2)  # the changed pytorch_model.bin: an unknown record
    strict, plain = tmp_path / "strict.toml", tmp_path / "plain.toml"
    strict.write_text('dangerous = ["somepkg"]\n')
    plain.write_text('dangerous = ["otherpkg"]\n')
    first = _app(served, database_url, scan={"pickle_rules": str(strict)}).advisories.rejudge_pickles()
    [dangerous] = first.records
    second_app = _app(served, database_url, scan={"pickle_rules": str(plain)})
    second = second_app.advisories.rejudge_pickles()
    assert dangerous in second.withdrawn
    open_classes = {r.class_id for r in second_app.store.advisories.open_own(REPO)}
    assert "pickle-dangerous-import" not in open_classes and "pickle-unknown-import" in open_classes
    second_app.store.engine.dispose()


def test_run_judges_again_at_start_and_when_the_rules_file_changes(pickle_app, served, database_url, tmp_path):
    """`hubwatch run`: stored verdicts judged at start under the operator's file (dangerous, one record); the file
    saved again lists the callable safe, and the periodic job reads it and withdraws the records, no restart."""
    import os
    import signal
    import subprocess
    import sys

    from tests.support.osv import osv_endpoint
    from tests.support.waiting import read_stderr_until

    _poll_to(pickle_app, served, 1)
    _poll_to(pickle_app, served, 2)  # the changed pytorch_model.bin: an unknown record
    rules = tmp_path / "rules.toml"
    rules.write_text('dangerous = ["somepkg"]\n')
    config = tmp_path / "hubwatch.toml"
    config.write_text(f'[hub]\nendpoint = "{served.endpoint}"\n[storage]\nurl = "{database_url}"\n'
                      f'[osv]\napi_url = "{osv_endpoint()}"\n[scan]\npickle_rules = "{rules}"\nrejudge_interval = "1s"\n')
    proc = subprocess.Popen([sys.executable, "-m", "tracker", "--config", str(config), "run"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env={**os.environ, "HUBWATCH_SERVER_PORT": "0"})
    try:
        started = read_stderr_until(proc, '"pickle_scans_rejudged"', timeout_s=60)
        first = next(json.loads(line) for line in started.splitlines() if '"pickle_scans_rejudged"' in line)
        assert (first["scans"], first["changed"], first["events"], first["withdrawn"]) == (2, 2, 1, 0)
        rules.write_text('safe = ["somepkg.thing"]  # saved again: reviewed, harmless\n')
        later = read_stderr_until(proc, '"withdrawn": 2', timeout_s=60)
        assert '"pickle_scans_rejudged"' in later
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    own = pickle_app.store.advisories.own(REPO)
    assert {r.class_id for r in own} == {"pickle-unknown-import", "pickle-dangerous-import"}
    assert all(r.record.get("withdrawn") for r in own) and not pickle_app.store.advisories.open_own(REPO)
