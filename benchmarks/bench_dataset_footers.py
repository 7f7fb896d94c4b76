"""Parquet footers by range on the replay server (issue 37's figures).

1. A 2 GB Parquet shard shaped like a Hub dataset's (24 columns with the datasets library's `huggingface`
   features, 64 row groups): its real footer served at the end of zeros, read through the Hub client's range
   source: requests and bytes fetched against footer + 8 (the goal: 2 requests, nothing more than that).
2. A small shard (under 64 KiB), read whole: requests.
4. A 3 MB JSON Lines shard (over the 1 MiB read whole) through the same range source: requests and KiB read
   (the goal: 2 requests, its first and last 64 KiB).
3. A dataset of 500 Parquet shards ingested by `hubwatch poll` through the real client, then a commit rewriting
   one shard: the footers read and the time to ingest that revision (the goal: 1 footer read), and the footers
   read for the first revision.

    python -m benchmarks run dataset_footers
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pyarrow as pa

from benchmarks.declare import Benchmark, Figure, detail, run_alone
from tests.support.parquet_files import glue_table, parquet_bytes, split_footer, write_parquet_repo
from tracker.cli.logs import configure_logging
from tracker.config.sections import LogSettings
from tracker.formats import parquet
from tracker.formats.registry import run_scan, scanner_for
from tracker.hub.client import HubClient
from tracker.standins.replay.control import ReplayServer

REPO = "bench/parquet-shards"
BIG = 2 * 10**9
BENCHMARK = Benchmark(
    name="dataset_footers",
    about="Parquet footers read by HTTP Range on the replay server: a 2 GB shard and a small one",
    tags=("quick", "formats", "datasets"),
    size="shards of the dataset in figure 3 (default 500; the figures keep their names)",
    small=50,
    figures=(
        Figure("2 GB shard: requests", "requests", goal=2, direction="lower", margin=0.0),
        Figure("2 GB shard: bytes read / (footer + 8)", "x", goal=1.0, direction="lower", margin=0.0),
        Figure("2 GB shard: KiB read", "KiB", note="its footer and the 8 bytes after it"),
        Figure("2 GB shard: scan time", "ms"),
        Figure("small shard: requests", "requests", goal=1, direction="lower", margin=0.0),
        Figure("3 MB JSON Lines shard: requests", "requests", goal=2, direction="lower", margin=0.0),
        Figure("3 MB JSON Lines shard: KiB read", "KiB", goal=128, direction="lower", margin=0.0,
               note="its first and last 64 KiB"),
        Figure("500 shards, first revision: footer reads", "files", note="every shard once"),
        Figure("500 shards, first revision: ingest time", "s"),
        Figure("500 shards, one rewritten: footer reads", "files", goal=1, direction="lower", margin=0.0),
        Figure("500 shards, one rewritten: ingest time", "s", note="the revision's poll: head, tree, footer, write"),
    ),
)


def hub_shaped_table(rows: int = 640) -> pa.Table:
    """24 columns of the kinds HF datasets carry (text, labels, lists, nested structs)."""
    base = glue_table("mrpc", rows)
    columns = {name: base[name] for name in base.column_names}
    for i in range(20):
        columns[f"feature_{i:02d}"] = pa.array([float(j) for j in range(rows)], pa.float32())
    return pa.table(columns)


def features(table: pa.Table) -> dict[str, dict[str, str]]:
    out = {"sentence1": {"dtype": "string", "_type": "Value"}, "sentence2": {"dtype": "string", "_type": "Value"},
           "label": {"names": ["not_equivalent", "equivalent"], "_type": "ClassLabel"},
           "idx": {"dtype": "int32", "_type": "Value"}}
    out.update({name: {"dtype": "float32", "_type": "Value"} for name in table.column_names if name.startswith("feature_")})
    return out


def many_shards(count: int) -> dict[str, dict[str, float]]:
    """`count` shards of one split polled as a dataset, then one of them rewritten: footers read and ingest times."""
    from tests.support.dataset_repos import lfs_file
    from tests.support.settings import settings_for
    from tracker.cli.app import App
    from tracker.standins.replay.history import scripted_history

    key = "datasets/bench/many-shards"
    name = f"data/train-{{:05d}}-of-{count:05d}.parquet"
    shards = {name.format(i): lfs_file(parquet_bytes(glue_table("cola", 20, start=20 * i))) for i in range(count)}
    rewritten = {name.format(count // 2): lfs_file(parquet_bytes(glue_table("cola", 21, start=20 * (count // 2))))}
    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp, ReplayServer(roots=[]) as server:
        server.add_repo(scripted_history(key, [shards, rewritten], titles=["shards", "one shard rewritten"]))
        server.set_head(key, 1)
        app = App(settings_for(server.endpoint, Path(tmp) / "hubwatch.db"))  # type: ignore[arg-type]
        app.store.watches.add_watch(key, "main", 900)
        for label in ("first revision", "one rewritten"):
            server.reset_requests()
            started = time.perf_counter()
            [outcome] = app.poller.poll([key])
            took = time.perf_counter() - started
            assert not outcome.failed, outcome
            reads = {r.path for r in server.requests if r.path.endswith(".parquet")}
            out[f"500 shards, {label}: footer reads"] = len(reads)  # named for the default size
            out[f"500 shards, {label}: ingest time"] = took
            detail(f"3. {count} shards, {label}: {len(reads)} footer(s) read, {len(server.requests)} requests, "
                   f"{took:.2f} s; changes: {[c.summary for r in outcome.revisions for c in r.changes][:3]}")
            server.set_head(key, 2)
        app.store.engine.dispose()
    return out


def measure(size: int | None = None) -> dict[str, float]:
    configure_logging(LogSettings(level="warning"))
    table = hub_shaped_table()
    data = parquet_bytes(table, features(table), row_group_size=10)
    _, footer = split_footer(data)
    small = parquet_bytes(glue_table("cola", 50))
    lines = b"".join(b'{"id": %d, "text": "row %07d of a JSON Lines shard", "label": %d}\n' % (i, i, i % 3)
                     for i in range(50_000))
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write_parquet_repo(root, REPO, {"data/train-00000-of-00001.parquet": data, "data/test-00000-of-00001.parquet": small,
                                        "data/validation.jsonl": lines},
                           big={"data/train-00000-of-00001.parquet": BIG})
        with ReplayServer(roots=[root]) as server:
            hub = HubClient(server.endpoint)
            sha = server.head_sha(REPO)
            spec = scanner_for("x.parquet", "dataset")
            assert spec is not None
            source = hub.open_range(REPO, sha, "data/train-00000-of-00001.parquet", BIG, spec.budget,
                                    first_block=spec.read_ahead, max_block=spec.read_ahead)
            started = time.perf_counter()
            scan, _ = run_scan(spec, source, "data/train-00000-of-00001.parquet")
            took = time.perf_counter() - started
            little = hub.open_range(REPO, sha, "data/test-00000-of-00001.parquet", len(small), spec.budget,
                                    first_block=spec.read_ahead, max_block=spec.read_ahead)
            small_scan, _ = run_scan(spec, little, "data/test-00000-of-00001.parquet")
            text_spec = scanner_for("x.jsonl", "dataset")
            assert text_spec is not None
            text = hub.open_range(REPO, sha, "data/validation.jsonl", len(lines), text_spec.budget,
                                  first_block=text_spec.read_ahead, max_block=text_spec.read_ahead)
            text_scan, _ = run_scan(text_spec, text, "data/validation.jsonl")
    assert scan.result.get("verdict") == "ok" and scan.result["rows"] == 640, (scan.result, scan.note)
    assert small_scan.result.get("rows") == 50, small_scan
    detail(f"1. a {BIG / 1e9:.0f} GB shard, {scan.result['column_count']} columns, {scan.result['row_groups']} row "
           f"groups, footer {len(footer):,} bytes: {source.requests} requests, {source.bytes_read:,} bytes, "
           f"{took * 1000:.1f} ms; features {list(scan.result['features'].items())[:3]}")
    detail(f"2. a {len(small):,}-byte shard: {little.requests} request(s), {little.bytes_read:,} bytes")
    assert parquet.SMALL_FILE >= len(small)
    assert text_scan.result.get("last_record") == "same", text_scan
    detail(f"4. a {len(lines):,}-byte JSON Lines shard: {text.requests} requests, {text.bytes_read:,} bytes; "
           f"{text_scan.note}")
    return many_shards(size or 500) | {"2 GB shard: requests": source.requests,
            "2 GB shard: bytes read / (footer + 8)": source.bytes_read / (len(footer) + 8),
            "2 GB shard: KiB read": source.bytes_read / 1024, "2 GB shard: scan time": took * 1000,
            "small shard: requests": little.requests, "3 MB JSON Lines shard: requests": text.requests,
            "3 MB JSON Lines shard: KiB read": text.bytes_read / 1024}


if __name__ == "__main__":
    run_alone(BENCHMARK, measure)
