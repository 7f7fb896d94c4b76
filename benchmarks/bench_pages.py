"""Figures: server time to render a repo's timeline and its estimates page when the repo has 1,000
revisions (goal: under 100 ms each), and each page's weight in bytes.

The history is written straight through the store: 1,000 revisions of one repo with bench_feed's changes
(a config change each, a chat-template change with three rendered prompts every 5th, a weights change every
10th), and an estimate on every revision (the estimates chart's worst case: 1,000 points per series).
Timed over real HTTP on loopback (the answer's full round trip, so an upper bound on server time): the
timeline's first page (50 revisions), its last page, the timeline filtered by kind and severity, and the
estimates page; then, in-process, the timeline template with all 1,000 revisions on one page.
Run: python -m benchmarks run pages
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx

from benchmarks.bench_feed import _changes
from benchmarks.declare import Benchmark, Figure, detail, run_alone
from feeds.http.app import ServerThread, create_app
from feeds.views.view_models import render
from storage.db import create_db_engine, migrate
from storage.event_log import NewEvent
from storage.front import Storage
from storage.history import NewEstimate, NewRevision

REPO = "bench/model-pages"
REVISIONS = 1000
GOAL_MS = 100.0
T0 = datetime(2025, 1, 1, tzinfo=UTC)
GIB = 2**30
CARDS = {"T4 16GB": 16, "L4 24GB": 24, "A10G 24GB": 24, "A100 40GB": 40, "A100 80GB": 80, "H100 80GB": 80, "H200 141GB": 131}
PAGES = ("timeline, first page (50 revisions)", "timeline, last page", "timeline, kind=chat_template min_severity=warning",
         "timeline, security only", "estimates page (1,000 points per series)", "revision page with a chat-template change")
ALL_ON_ONE = "timeline template, all 1,000 revisions on one page (in-process)"
BENCHMARK = Benchmark(
    name="pages",
    about="Server time to render a repo's pages when the repo has 1,000 revisions, over HTTP on loopback",
    tags=("slow", "pages"),  # page-time goals hold on a quiet machine; CI's check (the quick set) must not fail on load
    figures=(*(Figure(label, "ms", goal=GOAL_MS, margin=0.5, note="median of 20") for label in PAGES),
             Figure(ALL_ON_ONE, "ms", goal=GOAL_MS, margin=0.5, note="median of 5"),
             Figure("estimates page weight", "bytes")),
)
MODES = ("inference", "full_finetune", "lora", "qlora", "full_finetune_gc", "lora_gc", "qlora_gc")


def _estimate(i: int) -> NewEstimate:
    """An estimate shaped like the estimator's (parameters by tower, memory per mode, cards), growing with i."""
    params = 7_000_000_000 + 1_000_000 * i
    memory = {mode: {"batch_1_bytes": int(params * (18 if "full" in mode else 2.2 if "lora" in mode else 2) * (1 + n / 50)),
                     "static_bytes": params * 2, "per_sample_bytes": 10_000_000, "parts": {"weights": params * 2}}
              for n, mode in enumerate(MODES)}
    cards = {name: {"memory_bytes": gib * GIB, "usable_bytes": int(gib * GIB * 0.9),
                    "max_batch": {mode: max(0, int((gib * GIB * 0.9 - memory[mode]["static_bytes"]) / 10_000_000)) for mode in MODES}}
             for name, gib in CARDS.items()}
    result = {"parameters": {"total": params, "derived": params, "checkpoint": params,
                             "by_tower": {"text": params - 500_000_000, "head": 500_000_000},
                             "delta": {"parameters": 0, "percent": 0.0}, "used": "derived"},
              "memory": memory, "cards": cards, "notes": [], "warnings": []}
    return NewEstimate(params, result)


def write_history(url: str) -> Storage:
    engine = create_db_engine(url)
    migrate(engine)
    clock = iter(T0 + timedelta(minutes=m) for m in range(10 * REVISIONS + 10))
    store = Storage(engine, clock=lambda: next(clock))
    store.watches.add_watch(REPO, "main", 900)
    parent = None
    for i in range(REVISIONS):
        sha = f"{i:040x}"
        changes = _changes(i)
        severity = "warning" if len(changes) > 1 else "notice"
        store.history.save_revision(NewRevision(
            repo_id=REPO, sha=sha, parent_sha=parent, branch="main", committed_at=T0 + timedelta(hours=i),
            title=f"Update config.json (#{i})", message="", authors=["bench"], is_baseline=parent is None, files=[], blobs={},
            weight_files=[], changes=changes, estimate=_estimate(i),
            events=[NewEvent(f"00000000-0000-4000-8000-{i:012x}", "revision.ingested", f"model-pages: changed ({severity})",
                             severity, security=i % 10 == 0,
                             payload={"kinds": sorted({c.kind for c in changes}), "summaries": [c.summary for c in changes]})],
        ))
        parent = sha
    return store


def _time(client: httpx.Client, path: str, runs: int = 20) -> tuple[float, float, int]:
    client.get(path).raise_for_status()  # first use: templates compiled, connections open
    samples = []
    for _ in range(runs):
        t = time.perf_counter()
        answer = client.get(path)
        samples.append((time.perf_counter() - t) * 1000)
        answer.raise_for_status()
    return statistics.median(samples), max(samples), len(answer.content)


def measure(size: int | None = None) -> dict[str, float]:
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        store = write_history(f"sqlite:///{tmp}/bench.db")
        detail(f"history written: {REVISIONS} revisions of {REPO}, each with an estimate, in {time.perf_counter() - started:.1f} s")
        pages = [
            ("timeline, first page (50 revisions)", f"/repos/{REPO}"),
            ("timeline, last page", f"/repos/{REPO}?page={REVISIONS // 50}"),
            ("timeline, kind=chat_template min_severity=warning", f"/repos/{REPO}?kind=chat_template&min_severity=warning"),
            ("timeline, security only", f"/repos/{REPO}?security=1"),
            ("estimates page (1,000 points per series)", f"/repos/{REPO}/estimates"),
            ("revision page with a chat-template change", f"/repos/{REPO}/revisions/{995:040x}"),
        ]
        with ServerThread(create_app(store)) as server, httpx.Client(base_url=server.url, timeout=30) as client:
            for label, path in pages:
                median, worst, size = _time(client, path)
                figures[label] = median
                if label.startswith("estimates"):
                    figures["estimates page weight"] = size
                detail(f"{label:52s} median {median:6.1f} ms  max {worst:6.1f} ms  {size:8,d} bytes  "
                      f"ratio vs {GOAL_MS:.0f} ms goal: {median / GOAL_MS:.2f}x")
        revisions = store.history.list_revisions(REPO)
        changes = store.history.changes_by_revision(r.id for r in revisions)
        samples = []
        for _ in range(5):
            t = time.perf_counter()
            rows = [(r, changes[r.id]) for r in revisions]
            html = render("timeline.html", repo_id=REPO, rows=rows, page=1, more=False, matching=REVISIONS, total=REVISIONS,
                          filtered=False, hub="https://huggingface.co", links={"kind": [], "severity": [], "security": []},
                          query="?", watches=[])
            samples.append((time.perf_counter() - t) * 1000)
        median = statistics.median(samples)
        figures[ALL_ON_ONE] = median
        detail(f"{'timeline template, all 1,000 revisions on one page':52s} median {median:6.1f} ms  "
              f"{len(html.encode()):10,d} bytes  ratio vs {GOAL_MS:.0f} ms goal: {median / GOAL_MS:.2f}x (rows from the store, in-process)")
        store.engine.dispose()
    return figures


if __name__ == "__main__":
    run_alone(BENCHMARK, measure)
