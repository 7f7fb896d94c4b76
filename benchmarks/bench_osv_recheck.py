"""Figure: requests to OSV for the daily re-check of 1,000 watched repos, and its time, against the OSV fake.

Goal: at most 1 querybatch request per 1,000 distinct package versions (plus one query per advice
package), and detail fetches only for advisory ids new or modified since the last check.

The 1,000 repos are stored revisions whose facts name real version strings: `transformers_version` from
the real release list (dev builds for some), and requirements.txt pins of torch, numpy, tokenizers,
accelerate, safetensors, huggingface-hub, regex, tqdm and scipy for half of them, drawn with a fixed seed.
Three re-checks are measured: the first one (cold cache: every advisory's detail fetched once), a daily
one after OSV modified two advisories and published a new one, and a daily one with nothing new. Then
two more on one re-touched record (PYSEC-2026-2289, which every repo is told about): a cosmetic edit
(new `modified`, reworded details, a reference added: stored silently, 0 events; before substance
digests every repo told about it got one) and a range change (its fix moved: one event per repo told).
Run: python -m benchmarks run osv_recheck
"""

from __future__ import annotations

import json
import math
import random
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.declare import Benchmark, Figure, detail, run_alone
from storage.advisories import NewAdvisoryCheck, write_check
from storage.db import create_db_engine, migrate
from storage.event_log import NewEvent
from storage.front import Storage
from storage.history import NewFile, NewRevision
from tracker.advisories.facts import extract_facts
from tracker.advisories.osv import OsvClient
from tracker.advisories.service import AdvisoryService
from tracker.cli.logs import configure_logging
from tracker.config import LogSettings
from tracker.pipeline.snapshot_io import git_blob_oid
from tracker.revision.snapshot import FileEntry, Snapshot
from tracker.standins.osv import OsvFake, bundled_records

N = 1000
HELD_BACK = "PYSEC-2026-3929"  # published by "OSV" between the first and the daily re-check
MODIFIED = ("PYSEC-2026-2289", "PYSEC-2024-251")
RETOUCHED = "PYSEC-2026-2289"
T0 = datetime(2026, 11, 29, tzinfo=UTC)
BENCHMARK = Benchmark(
    name="osv_recheck",
    about="Requests to OSV for the daily re-check of 1,000 watched repos, and its time, against the OSV fake",
    tags=("slow", "advisories"),
    figures=(
        Figure("daily re-check: querybatch requests / goal", "ratio", goal=1.0,
               note="goal: ceil(queries / 1000) querybatch requests"),
        Figure("daily re-check: detail fetches / new or modified ids", "ratio", goal=1.0,
               note="goal: details only for ids new or modified since the last check"),
        Figure("re-check with nothing new: detail fetches", "requests", goal=0),
        Figure("cosmetic edit of an advisory: events", "events", goal=0),
        Figure("range change of an advisory: events / repos told", "ratio", goal=1.0, direction="higher",
               note="goal: one event per repo told"),
        Figure("daily re-check time", "s", note="1,000 repos, loopback fake, SQLite"),
    ),
)


def transformers_versions() -> list[str]:
    record = next(r for r in bundled_records() if r["id"] == "PYSEC-2026-3929")
    return list(record["affected"][0]["versions"])


def torch_versions() -> list[str]:
    record = next(r for r in bundled_records() if r["id"] == "PYSEC-2026-139")
    return list(record["affected"][0]["versions"])


def repo_files(rng: random.Random, i: int) -> dict[str, bytes]:
    version = rng.choice(transformers_versions())
    if rng.random() < 0.3:
        version = f"{version.split('rc')[0]}.dev0"
    files = {"config.json": json.dumps({"model_type": "llama", "transformers_version": version}).encode()}
    if i % 2:
        pins = [f"torch=={rng.choice(torch_versions())}", f"numpy==1.{rng.randint(17, 26)}.{rng.randint(0, 6)}",
                f"tokenizers==0.{rng.randint(10, 21)}.{rng.randint(0, 4)}", f"accelerate==0.{rng.randint(20, 34)}.{rng.randint(0, 2)}",
                f"safetensors==0.{rng.randint(3, 5)}.{rng.randint(0, 5)}", f"huggingface-hub==0.{rng.randint(10, 36)}.{rng.randint(0, 4)}",
                f"regex=={rng.randint(2021, 2024)}.{rng.randint(1, 12)}.{rng.randint(1, 28)}",
                f"tqdm==4.{rng.randint(50, 67)}.{rng.randint(0, 5)}", f"scipy==1.{rng.randint(5, 14)}.{rng.randint(0, 3)}"]
        files["requirements.txt"] = "\n".join(pins).encode() + b"\n"
    return files


def seed(store: Storage) -> int:
    """N watched repos, each a stored revision with its facts (no network). Returns distinct versions."""
    rng = random.Random(1234)
    versions: set[tuple[str, str]] = set()
    for i in range(N):
        repo_id, sha = f"bench/model-{i:04d}", f"{i:040x}"
        files = repo_files(rng, i)
        snap = Snapshot(repo_id, sha, {p: FileEntry(p, git_blob_oid(d), len(d)) for p, d in files.items()}, dict(files))
        facts = extract_facts(snap)
        versions.update(facts.versions())
        watch = store.watches.add_watch(repo_id, "main", 900)
        new = NewRevision(repo_id=repo_id, sha=sha, parent_sha=None, branch="main", committed_at=T0, title="init",
                          message="", authors=[], is_baseline=True,
                          files=[NewFile(p, git_blob_oid(d), len(d), "config", held=True) for p, d in files.items()],
                          blobs={git_blob_oid(d): d for d in files.values()}, weight_files=[], changes=[],
                          events=[NewEvent(f"bench-{i}", "revision.ingested", "init", "info")])
        check = NewAdvisoryCheck(repo_id=repo_id, facts=facts.to_dict())
        store.history.save_revision(new, watch_id=watch.id, extra_writes=[lambda s, r, c=check: write_check(s, r.id, c, T0)])
    return len(versions)


def run(service: AdvisoryService, fake: OsvFake) -> tuple[object, float, dict[str, int]]:
    fake.reset_requests()
    started = time.perf_counter()
    outcome = service.recheck()
    return outcome, time.perf_counter() - started, dict(fake.counts())


def measure(size: int | None = None) -> dict[str, float]:
    configure_logging(LogSettings(level="warning"))
    with tempfile.TemporaryDirectory() as tmp, OsvFake([r for r in bundled_records() if r["id"] != HELD_BACK]) as fake:
        engine = create_db_engine(f"sqlite:///{tmp}/h.db")
        migrate(engine)
        store = Storage(engine)
        started = time.perf_counter()
        distinct = seed(store)
        seeded_s = time.perf_counter() - started
        service = AdvisoryService(store, OsvClient(fake.endpoint), hub_url="https://huggingface.co")
        first, first_s, first_counts = run(service, fake)
        for vuln_id in MODIFIED:
            fake.modify(vuln_id, "2026-12-01T08:00:00Z")
        fake.put(next(r for r in bundled_records() if r["id"] == HELD_BACK))
        daily, daily_s, daily_counts = run(service, fake)
        quiet, quiet_s, quiet_counts = run(service, fake)
        told_before = sum(1 for _, key in service.db.told(f"bench/model-{i:04d}" for i in range(N)) if key == RETOUCHED)
        record = fake.record(RETOUCHED)
        fake.modify(RETOUCHED, "2026-12-02T08:00:00Z", details=record["details"] + " (reworded)",
                    references=[*record.get("references", []), {"type": "WEB", "url": "https://example.org/advisory"}])
        cosmetic, cosmetic_s, cosmetic_counts = run(service, fake)
        affected = json.loads(json.dumps(record["affected"]))
        affected[0]["ranges"][0]["events"] = [{"introduced": "0"}, {"fixed": "5.3.1"}]
        fake.modify(RETOUCHED, "2026-12-03T08:00:00Z", affected=affected)
        ranged, ranged_s, ranged_counts = run(service, fake)
        service.close()
    goal = math.ceil(daily.queries / 1000)
    changed = len(MODIFIED) + 1
    detail(f"{N} repos (seeded in {seeded_s:.1f} s), {distinct} distinct package versions, {daily.queries} queries")
    for label, outcome, seconds, counts in (("first (cold record cache)", first, first_s, first_counts),
                                            ("daily", daily, daily_s, daily_counts), ("quiet", quiet, quiet_s, quiet_counts),
                                            ("cosmetic", cosmetic, cosmetic_s, cosmetic_counts),
                                            ("range", ranged, ranged_s, ranged_counts)):
        detail(f"{label:<28}{counts.get('querybatch', 0):>5} querybatch{counts.get('vulns', 0):>5} details"
               f"{len(outcome.events):>6} events {seconds * 1000:>8.0f} ms")
    return {"daily re-check: querybatch requests / goal": daily_counts["querybatch"] / goal,
            "daily re-check: detail fetches / new or modified ids": daily_counts.get("vulns", 0) / changed,
            "re-check with nothing new: detail fetches": quiet_counts.get("vulns", 0),
            "cosmetic edit of an advisory: events": len(cosmetic.events),
            "range change of an advisory: events / repos told": len(ranged.events) / max(told_before, 1),
            "daily re-check time": daily_s}


if __name__ == "__main__":
    run_alone(BENCHMARK, measure)
