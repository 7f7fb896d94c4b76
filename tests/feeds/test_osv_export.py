"""`hubwatch advisories export --osv-zip FILE [--since TIMESTAMP]`: osv.dev's offline layout (all.zip with one
`<ID>.json` per record, modified_id.csv beside it, newest first), the very records the OSV API serves, and an
incremental export since a time; refusals for what cannot be done."""

from __future__ import annotations

import csv
import json
import zipfile
from collections.abc import Iterator
from pathlib import Path

import jsonschema
import pytest

from feeds.osv.archive import write_archive
from feeds.osv.database import OsvDatabase
from tests.support.cli import run_cli
from tests.support.osv_records import at, custom_code, dangerous_pickle, plant, record_for
from tests.support.served import HOSTILE, LLAMA, History

pytestmark = pytest.mark.postgres  # the own-record reads (JSON keys read in SQL) run on PostgreSQL too (.ci/run)
SCHEMA = Path(__file__).resolve().parents[1] / "fixtures" / "osv" / "osv-schema.json"
PUBLIC = "https://hubwatch.example.org"


class Exported:
    def __init__(self, history: History, folder: Path) -> None:
        self.history = history
        self.folder = folder
        store = history.store()
        llama = [r.sha for r in reversed(store.history.list_revisions(LLAMA, limit=100))]
        hostile = store.history.list_revisions(HOSTILE, limit=1)[0]
        ids = {(LLAMA, r.sha): r.id for r in store.history.list_revisions(LLAMA, limit=100)} | {(HOSTILE, hostile.sha): hostile.id}
        plant(store, [
            record_for(LLAMA, llama[1], dangerous_pickle(), at=at("2026-10-01T08:00:00"), fixed_sha=llama[3]),
            record_for(LLAMA, llama[2], dangerous_pickle("x.pkl"), at=at("2026-10-02T08:00:00"), withdrawn=True),
            record_for(HOSTILE, hostile.sha, custom_code(), at=at("2026-11-20T08:00:00")),
        ], ids)
        self.store = store
        self.config = folder / "hubwatch.toml"
        self.config.write_text(f'[storage]\nurl = "{history.url}"\n\n[server]\npublic_url = "{PUBLIC}"\n', encoding="utf-8")

    def export(self, *args: str):
        return run_cli("advisories", "export", *args, config=self.config)


@pytest.fixture(scope="module")
def exported(history: History, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Exported]:
    folder = tmp_path_factory.mktemp("osv-export")
    yield Exported(history.copy_to(folder), folder)


def _zip(path: Path) -> dict[str, dict]:
    with zipfile.ZipFile(path) as zf:
        return {name: json.loads(zf.read(name)) for name in zf.namelist()}


def test_the_zip_holds_one_file_per_record_as_the_api_serves_it(exported: Exported) -> None:
    """all.zip: `<ID>.json` at the top for every record, withdrawn ones too, each valid OSV and equal to what
    GET /v1/vulns/{id} serves from a server at [server] public_url; modified_id.csv beside it, newest first."""
    target = exported.folder / "full" / "all.zip"
    result = exported.export("--osv-zip", str(target))
    assert result.returncode == 0, result.stderr
    records = _zip(target)
    own = exported.store.advisories.own()
    assert sorted(records) == sorted(f"{o.id}.json" for o in own) and len(own) == 4
    database = OsvDatabase(exported.store)
    validator = jsonschema.Draft202012Validator(json.loads(SCHEMA.read_text()))
    for name, record in records.items():
        assert record == database.vuln(name.removesuffix(".json"), PUBLIC)
        assert list(validator.iter_errors(record)) == []
    assert any(r.get("withdrawn") for r in records.values())
    rows = list(csv.reader((target.parent / "modified_id.csv").read_text().splitlines()))
    assert [r[1] for r in rows] == [r["id"] for r in sorted(records.values(), key=lambda r: (r["modified"], r["id"]), reverse=True)]
    assert all(r[0] == records[f"{r[1]}.json"]["modified"] for r in rows)
    assert result.stdout.strip() == f"wrote 4 OSV record(s) to {target} (index: {target.parent / 'modified_id.csv'})"


def test_since_exports_only_what_changed_from_then(exported: Exported) -> None:
    """--since TIMESTAMP: the records modified at or after it, zip and index alike."""
    target = exported.folder / "incremental" / "all.zip"
    result = exported.export("--osv-zip", str(target), "--since", "2026-11-01T00:00:00Z")
    assert result.returncode == 0, result.stderr
    newer = {o.id for o in exported.store.advisories.own() if o.record["modified"] >= "2026-11-01T00:00:00Z"}
    assert {n.removesuffix(".json") for n in _zip(target)} == newer and len(newer) == 2
    assert {line.split(",")[1] for line in (target.parent / "modified_id.csv").read_text().splitlines()} == newer
    same = exported.export("--osv-zip", str(exported.folder / "same" / "all.zip"), "--since", "2026-11-01T00:00:00")
    assert (exported.folder / "same" / "all.zip").read_bytes() == target.read_bytes()  # no offset: UTC
    assert "modified since 2026-11-01T00:00:00Z" in same.stdout


def test_the_same_records_give_the_same_bytes(tmp_path: Path) -> None:
    """A fixed entry time and order: exporting twice writes identical archives (a mirror compares by hash)."""
    records = [{"id": "x_B", "modified": "2026-01-02T00:00:00Z"}, {"id": "x_A", "modified": "2026-01-01T00:00:00Z"}]
    first = write_archive(records, tmp_path / "a" / "all.zip").zip_path.read_bytes()
    second = write_archive(list(reversed(records)), tmp_path / "b" / "all.zip").zip_path.read_bytes()
    assert first == second
    assert (tmp_path / "a" / "modified_id.csv").read_text() == "2026-01-02T00:00:00Z,x_B\n2026-01-01T00:00:00Z,x_A\n"


def test_a_failed_export_leaves_the_last_archive(tmp_path: Path) -> None:
    """The zip is built beside its target and moved into place: a record that cannot be written leaves the old
    archive whole and no temporary file behind."""
    target = tmp_path / "all.zip"
    write_archive([{"id": "x_A", "modified": "2026-01-01T00:00:00Z"}], target)
    before = target.read_bytes()
    with pytest.raises(TypeError):
        write_archive([{"id": "x_B", "modified": "2026-01-01T00:00:00Z", "bad": object()}], target)
    assert target.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["all.zip", "modified_id.csv"]


@pytest.mark.parametrize(("args", "message"), [
    ((), "name a DIRECTORY or --osv-zip FILE"),
    (("somewhere", "--osv-zip", "x.zip"), "name a DIRECTORY or --osv-zip FILE"),
    (("somewhere", "--since", "2026-01-01T00:00:00Z"), "--since goes with --osv-zip"),
    (("--osv-zip", "x.zip", "--since", "last tuesday"), "is not an RFC 3339 timestamp"),
])
def test_bad_arguments_are_usage_errors(exported: Exported, args: tuple[str, ...], message: str) -> None:
    """Neither or both outputs, --since alone, an unreadable time: exit 2 with the reason, nothing written."""
    result = exported.export(*args)
    assert result.returncode == 2 and message in result.stderr


def test_an_unwritable_target_is_a_clear_error(exported: Exported) -> None:
    """A target under a file: exit 1 naming the path, no traceback."""
    blocker = exported.folder / "a-file"
    blocker.write_text("x")
    result = exported.export("--osv-zip", str(blocker / "all.zip"))
    assert result.returncode == 1 and f"cannot write {blocker / 'all.zip'}" in result.stderr
    assert "Traceback" not in result.stderr
