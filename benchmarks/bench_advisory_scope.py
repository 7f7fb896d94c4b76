"""Figure: the advisories driving each repo's loader advice, before and after advisories were scoped to
the models they concern, on the bundled replay histories and the bundled OSV records.

"Before" judges with an empty scope table (every advisory concerns every model, as hubwatch did until
scopes existed); "after" with the shipped table (data/rules.json "scopes"). For every revision of every
bundled history the advice is computed from its facts alone (no network, no database); the table shows
each repo's head, and the totals count every revision.
Run: python -m benchmarks run advisory_scope   (or .venv/bin/python benchmarks/bench_advisory_scope.py)
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.declare import Benchmark, Figure, detail, run_alone
from tracker.advisories.advice import LoaderAdvice, loader_advice
from tracker.advisories.facts import extract_facts
from tracker.advisories.records import AdvisoryIndex
from tracker.advisories.scope import NO_SCOPES, default_scopes
from tracker.revision.snapshot import FileEntry, Snapshot
from tracker.standins.osv import bundled_records
from tracker.standins.replay.history import LfsBlob, RepoHistory, load_roots

BENCHMARK = Benchmark(
    name="advisory_scope",
    about="transformers advisories driving each bundled revision's loader advice, unscoped against scoped",
    tags=("quick", "advisories"),
    figures=(
        Figure("advisories driving the advice, scoped", "advisories", note="summed over every bundled revision"),
        Figure("advisories driving the advice, unscoped", "advisories", note="as before scopes existed (NO_SCOPES)"),
        Figure("scoped / unscoped", "ratio"),
    ),
)

HISTORIES = Path(__file__).resolve().parent.parent / "tracker" / "standins" / "replay" / "histories"
MAX_CONTENT = 4 << 20


def snapshot_at(history: RepoHistory, sha: str) -> Snapshot:
    """A commit's tree as the ingest sees it: every file listed, small non-LFS files with their bytes."""
    snap = Snapshot(history.repo_id, sha)
    for path, entry in history.trees[sha].items():
        blob = entry.blob
        if isinstance(blob, LfsBlob):
            snap.files[path] = FileEntry(path, blob.oid, len(blob.pointer), blob.lfs_sha256, blob.size)
            continue
        snap.files[path] = FileEntry(path, blob.oid, blob.size)
        if blob.size <= MAX_CONTENT and not entry.missing:
            snap.contents[path] = blob.read()
    return snap


def drivers(advice: LoaderAdvice, package: str = "transformers") -> tuple[list[str], str]:
    """The advisory keys behind a package's floor (fixed or not), and the floor as told."""
    for p in advice.packages:
        if p.package == package:
            keys = [b.key for b in p.because + p.unfixed]
            floor = p.floor or "-"
            if p.unfixed:
                floor += " +unfixed"
            return keys, floor
    return [], "-"


def measure(size: int | None = None) -> dict[str, float]:
    index = AdvisoryIndex.build(bundled_records())
    repos = load_roots([HISTORIES])
    rows, revisions, before_total, after_total = [], 0, 0, 0
    for repo_id, history in sorted(repos.items()):
        for commit in history.commits:
            facts = extract_facts(snapshot_at(history, commit.sha))
            before = loader_advice(index, facts, scopes=NO_SCOPES)
            after = loader_advice(index, facts, scopes=default_scopes())
            b_keys, b_floor = drivers(before)
            a_keys, a_floor = drivers(after)
            revisions += 1
            before_total += len(b_keys)
            after_total += len(a_keys)
            if commit is history.commits[-1]:
                overall = next(p for p in after.packages if p.package == "transformers")
                rows.append((repo_id, ", ".join(facts.model_types[:1]) or "-", len(b_keys), b_floor, len(a_keys),
                             a_floor, overall.package_floor or "-", len(overall.not_counted)))
    detail(f"bundled OSV records: {len(list(bundled_records()))} ({len(index.advisories)} advisories); "
          f"bundled histories: {len(repos)} repos, {revisions} revisions")
    detail(f"{'repo (head)':<44}{'model_type':<12}{'before':>7} {'floor told':<20}{'after':>6} {'floor told':<20}"
          f"{'package floor':<15}{'not counted':>11}")
    for repo_id, model, nb, fb, na, fa, pf, nc in rows:
        detail(f"{repo_id:<44}{model:<12}{nb:>7} {fb:<20}{na:>6} {fa:<20}{pf:<15}{nc:>11}")
    return {"advisories driving the advice, scoped": after_total, "advisories driving the advice, unscoped": before_total,
            "scoped / unscoped": after_total / max(before_total, 1)}


if __name__ == "__main__":
    run_alone(BENCHMARK, measure)
