"""Figure: a repo feed of 1,000 events rendered (goal: under 50 ms), and the 304 for an unchanged ETag.

The history is written straight through the store (1,000 revisions of one repo, each with a config change;
every 5th also a chat-template change with a unified diff and three rendered sample prompts, every 10th a
weights change), because ingesting 1,000 commits through the pipeline would measure the pipeline.
Prints, for Atom and RSS: a cold render (nothing cached: every entry's HTML rendered), a warm render (entry
HTML cached, the document built by feedgen again), and over real HTTP on loopback the first answer after
the daemon's warm-up (entries rendered when their events were stored, document built on request), the
200 answer with the document cached by ETag, and the 304 answer to If-None-Match. Ratios are against the
50 ms goal.
The goal is held by the served paths (warm render, first HTTP answer after the warm-up, the 304); the cold render
(every entry's HTML rendered on the request) is printed beside them with no goal: the daemon renders entries when
their events are stored. Run: python -m benchmarks run feed   (size: events, default 1,000)
"""

from __future__ import annotations

import gc
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx

from benchmarks.declare import Benchmark, Figure, detail, run_alone
from feeds.http.app import ServerThread, create_app
from feeds.views.feed import FeedBuilder, FeedRequest
from storage.db import create_db_engine, migrate
from storage.event_log import NewEvent
from storage.front import Storage
from storage.history import NewChange, NewRevision

REPO = "bench/model-feed"
EVENTS = 1000
GOAL_MS = 50.0
T0 = datetime(2025, 1, 1, tzinfo=UTC)
TIMING_MARGIN = 0.5  # medians of 30-50 renders on a shared 2-core machine


def _figures() -> tuple[Figure, ...]:
    out = []
    for fmt in ("atom", "rss"):
        out += [Figure(f"{fmt} warm render (entry HTML cached)", "ms", goal=GOAL_MS, margin=TIMING_MARGIN),
                Figure(f"{fmt} cold render (no cache)", "ms", note="no goal: entries are rendered when stored"),
                Figure(f"{fmt} HTTP first answer after the warm-up", "ms", goal=GOAL_MS, margin=3.0,
                       note="one request (the document is cached after it): the noisiest figure, so the widest margin"),
                Figure(f"{fmt} HTTP 304 for an unchanged ETag", "ms", goal=GOAL_MS, margin=TIMING_MARGIN)]
    return (*out, Figure("daemon warm-up of every entry", "ms"))


BENCHMARK = Benchmark(
    name="feed",
    about="A repo feed of 1,000 events rendered (Atom and RSS), and the 304 for an unchanged ETag",
    tags=("slow", "feeds"),  # render-time goals hold on a quiet machine; CI's check (the quick set) must not fail on load
    size="events in the repo's history (default 1,000)",
    small=200,
    figures=_figures(),
)


def _prompt(i: int, side: str) -> str:
    turns = "".join(f"<|start_header_id|>user<|end_header_id|>\n\nQuestion {n} of revision {i}<|eot_id|>" for n in range(6))
    return f"<|begin_of_text|>{turns}<|start_header_id|>assistant<|end_header_id|>\n\n({side})"


def _changes(i: int) -> list[NewChange]:
    changes = [
        NewChange("config", "config.json", f"config.json: max_position_embeddings {8192 + i - 1} -> {8192 + i}", "notice",
                  structural=True, detail={"status": "changed", "changes": [
                      {"path": "max_position_embeddings", "change": "changed", "old": 8192 + i - 1, "new": 8192 + i},
                      {"path": "rope_scaling.factor", "change": "changed", "old": 8.0, "new": 8.0 + i / 1000}]}),
    ]
    if i % 5 == 0:
        diff = "\n".join(["--- a/tokenizer_config.json: chat_template", "+++ b/tokenizer_config.json: chat_template", "@@ -1,30 +1,30 @@"]
                         + [f"{'+-'[n % 2]}{{%- if messages[{n}]['role'] == 'system' %}}<|start_header_id|>{n}" for n in range(30)])
        samples = [{"conversation": name, "before": {"prompt": _prompt(i, "before")}, "after": {"prompt": _prompt(i, "after")},
                    "differs": True} for name in ("system_and_history", "single_user_turn", "tool_call_round_trip")]
        changes.append(NewChange("chat_template", "tokenizer_config.json",
                                 "chat_template (default): template changed; rendered prompt differs for 3 of 3 sample conversations",
                                 "warning", detail={"template": "default", "change": "changed", "diff": diff, "samples": samples}))
    if i % 10 == 0:
        changes.append(NewChange("weights", "model.safetensors", "model.safetensors changed (4.98 GB -> 4.98 GB)", "warning",
                                 security=True,
                                 detail={"status": "changed", "parameters": {"old": 2_000_000_000, "new": 2_000_000_000 + i}}))
    return changes


def write_history(url: str, events: int = EVENTS, repo_id: str = REPO) -> Storage:
    """A database holding `events` revisions of `repo_id`, each with its event."""
    engine = create_db_engine(url)
    migrate(engine)
    clock = iter(T0 + timedelta(minutes=m) for m in range(10 * events + 10))
    store = Storage(engine, clock=lambda: next(clock))
    store.watches.add_watch(repo_id, "main", 900)
    parent = None
    for i in range(events):
        sha = f"{i:040x}"
        changes = _changes(i)
        severity = "warning" if len(changes) > 1 else "notice"
        store.history.save_revision(NewRevision(
            repo_id=repo_id, sha=sha, parent_sha=parent, branch="main", committed_at=T0 + timedelta(hours=i),
            title=f"Update config.json (#{i})", message="", authors=["bench"], is_baseline=parent is None, files=[], blobs={},
            weight_files=[], changes=changes,
            events=[NewEvent(f"00000000-0000-4000-8000-{i:012x}", "revision.ingested",
                             f"model-feed: config{' and chat template' if i % 5 == 0 else ''} changed ({severity})", severity,
                             security=i % 10 == 0,
                             payload={"commit_title": f"Update config.json (#{i})", "baseline": parent is None,
                                      "kinds": sorted({c.kind for c in changes}),
                                      "summaries": [c.summary for c in changes]})],
        ))
        parent = sha
    return store


def _ms(samples: list[float]) -> str:
    return f"median {statistics.median(samples):6.1f} ms, p99 {sorted(samples)[int(len(samples) * 0.99) - 1]:6.1f} ms"


def measure(size: int | None = None) -> dict[str, float]:
    events = size or EVENTS
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/bench.db"
        started = time.perf_counter()
        store = write_history(url, events)
        detail(f"history written: {events} events of {REPO} in {time.perf_counter() - started:.1f} s")
        gc.collect()
        gc.freeze()  # as `hubwatch run` / `serve` do once started: start-up objects leave the collector's passes
        base = "http://127.0.0.1"
        for fmt in ("atom", "rss"):
            request = FeedRequest("repo", fmt, REPO, limit=events)
            cold = []
            for _ in range(5):
                builder = FeedBuilder(store)  # empty caches
                t = time.perf_counter()
                body = builder.render(request, base, builder.state(request))
                cold.append((time.perf_counter() - t) * 1000)
            warm = []
            for _ in range(30):
                t = time.perf_counter()
                builder.render(request, base, builder.state(request))
                warm.append((time.perf_counter() - t) * 1000)
            median = statistics.median(warm)
            figures[f"{fmt} warm render (entry HTML cached)"] = median
            figures[f"{fmt} cold render (no cache)"] = statistics.median(cold)
            detail(f"{fmt}: {body.count(b'<entry>') + body.count(b'<item>')} entries, {len(body) / 1e6:.2f} MB")
            detail(f"  cold render (no cache):          {_ms(cold)}  "
                  f"ratio vs {GOAL_MS:.0f} ms goal: {statistics.median(cold) / GOAL_MS:.2f}x")
            detail(f"  warm render (entry HTML cached): {_ms(warm)}  ratio vs {GOAL_MS:.0f} ms goal: {median / GOAL_MS:.2f}x")

        with ServerThread(create_app(store)) as server, httpx.Client(base_url=server.url) as client:
            t = time.perf_counter()
            made = server.warm_feeds()  # what `hubwatch run` does at start and after each poll that stored revisions
            figures["daemon warm-up of every entry"] = (time.perf_counter() - t) * 1000
            detail(f"daemon warm-up: {made} entries rendered ahead of any request in {(time.perf_counter() - t) * 1000:.0f} ms")
            for fmt in ("atom", "rss"):
                path = f"/repos/{REPO}/feed.{fmt}?limit={events}"
                t = time.perf_counter()
                first = client.get(path)
                first_ms = (time.perf_counter() - t) * 1000
                figures[f"{fmt} HTTP first answer after the warm-up"] = first_ms
                detail(f"HTTP {fmt}: first request after the warm-up (document built): {first_ms:.1f} ms  "
                      f"ratio vs {GOAL_MS:.0f} ms goal: {first_ms / GOAL_MS:.2f}x")
                etag = first.headers["etag"]
                full, not_modified = [], []
                for _ in range(50):
                    t = time.perf_counter()
                    assert client.get(path).status_code == 200
                    full.append((time.perf_counter() - t) * 1000)
                    t = time.perf_counter()
                    answer = client.get(path, headers={"If-None-Match": etag})
                    not_modified.append((time.perf_counter() - t) * 1000)
                    assert answer.status_code == 304 and not answer.content
                figures[f"{fmt} HTTP 304 for an unchanged ETag"] = statistics.median(not_modified)
                detail(f"HTTP {fmt} ({len(first.content) / 1e6:.2f} MB):")
                detail(f"  200, document cached by ETag:    {_ms(full)}")
                detail(f"  304 for an unchanged ETag:       {_ms(not_modified)}  ratio vs {GOAL_MS:.0f} ms goal: "
                      f"{statistics.median(not_modified) / GOAL_MS:.3f}x")
        store.engine.dispose()
    return figures


if __name__ == "__main__":
    run_alone(BENCHMARK, measure)
