"""GGUF headers by range on the replay server (issue 22's figures).

1. A multi-GB GGUF with a real-shaped header (a 256,000-token vocabulary with merges, scores and types, 32 blocks:
   291 tensors, Q4_K/Q6_K), served as head + zeros: bytes fetched against its size, and against the goal of 1%.
2. A repo of 20 GGUF quantizations of one model, ingested by the pipeline, then a later commit and a fork carrying
   the same files (same LFS sha256): resolve requests and bytes fetched per file the first time, and again.

The vocabulary is all-MiniLM-L6-v2's 30,522 real tokens followed by generated ones up to 256,000.

    python -m benchmarks run formats_gguf
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.declare import Benchmark, Figure, detail, run_alone
from tests.support.gguf_files import GgufFile, GgufSpec, file_size, gguf_header, real_template, real_vocab, write_gguf_repo
from tests.support.settings import settings_for
from tracker.cli.app import App
from tracker.cli.logs import configure_logging
from tracker.config.sections import LogSettings
from tracker.formats import gguf
from tracker.hub.client import HubClient
from tracker.standins.replay.control import ReplayServer

QUANTS = [("Q2_K", 10), ("Q3_K", 12), ("Q4_0", 2), ("Q4_1", 3), ("Q4_K", 15), ("Q5_0", 8), ("Q5_1", 9), ("Q5_K", 17),
          ("Q6_K", 18), ("Q8_0", 7), ("IQ2_XXS", 19), ("IQ2_XS", 20), ("IQ3_XXS", 23), ("IQ1_S", 24), ("IQ4_NL", 25),
          ("IQ3_S", 26), ("IQ2_S", 28), ("IQ4_XS", 30), ("IQ1_M", 31), ("F16", 1)]

AT = "results/bench_formats_gguf.txt, commit 5c0c761"
BENCHMARK = Benchmark(
    name="formats_gguf",
    about="GGUF headers read by HTTP Range on the replay server: one multi-GB file, and 20 quantizations ingested",
    tags=("slow", "formats"),
    figures=(
        Figure("one 5.7 GB GGUF: bytes read / size", "%", goal=1.0, baseline=0.203, baseline_at=AT),
        Figure("one 5.7 GB GGUF: requests", "requests", baseline=4, baseline_at=AT),
        Figure("one 5.7 GB GGUF: scan time", "s", baseline=1.44, baseline_at=AT),
        Figure("20 quantizations, first time: requests per file", "requests", baseline=3.0, baseline_at=AT),
        Figure("20 quantizations, first time: MiB fetched per file", "MiB", baseline=7.0, baseline_at=AT),
        Figure("a later commit carrying them: requests", "requests", note="the same LFS sha256: read again never"),
        Figure("a fork carrying them: requests", "requests"),
    ),
)


def big_vocab(n: int = 256_000) -> list[str]:
    real = real_vocab()
    return real + [f"<tok_{i}>" for i in range(n - len(real))]


def figure_one(root: Path) -> dict[str, float]:
    tokens = big_vocab()
    spec = GgufSpec(tokens=tokens, merges=[f"{t[:2]} {t[2:]}" for t in tokens[1000:200_000]], layers=32, width=4096,
                    ffn=14336, heads=32, kv_heads=8, templates={"default": real_template()})
    header = gguf_header(spec)
    size = file_size(header, spec)
    write_gguf_repo(root, "bench/big-gguf", [{"gguf": {"model-Q4_K_M.gguf": GgufFile(header, size)}}])
    with ReplayServer(roots=[root]) as server:
        hub = HubClient(server.endpoint)
        sha = server.head_sha("bench/big-gguf")
        source = hub.open_range("bench/big-gguf", sha, "model-Q4_K_M.gguf", size)
        started = time.perf_counter()
        result, scanned, note = gguf.scan(source)
        took = time.perf_counter() - started
    share = source.bytes_read / size
    detail(f"1. one {size / 1e9:.2f} GB GGUF ({result['tensor_count']} tensors, {result['tokenizer']['tokens']:,} tokens, "
          f"header {len(header) / 2**20:.1f} MiB): read {source.bytes_read / 2**20:.1f} MiB in {source.requests} "
          f"requests, {took:.2f} s; note={note}")
    return {"one 5.7 GB GGUF: bytes read / size": 100 * share, "one 5.7 GB GGUF: requests": source.requests,
            "one 5.7 GB GGUF: scan time": took}


def figure_two(root: Path, db: Path) -> dict[str, float]:
    tokens = big_vocab(128_000)
    files = {}
    for name, ftype in QUANTS:
        spec = GgufSpec(tokens=tokens, quant=name, file_type=ftype, layers=32, width=4096, ffn=14336, heads=32,
                        kv_heads=8, templates={"default": real_template()})
        header = gguf_header(spec)
        files[f"model-{name}.gguf"] = GgufFile(header, file_size(header, spec))
    commits = [{"title": "quantizations", "gguf": files}, {"title": "readme", "files": {"README.md": "# quants\n"}}]
    write_gguf_repo(root, "bench/quants", commits)
    write_gguf_repo(root, "bench/quants-fork", commits[:1])
    with ReplayServer(roots=[root]) as server:
        app = App(settings_for(server.endpoint, db))  # type: ignore[arg-type]
        server.set_head("bench/quants", 1)
        app.store.watches.add_watch("bench/quants", "main", 900)
        app.store.watches.add_watch("bench/quants-fork", "main", 900)
        rounds = []
        for label, act in (("first time (20 new files)", lambda: app.poller.poll(["bench/quants"])),
                           ("a later commit carrying them", lambda: (server.set_head("bench/quants", 2),
                                                                     app.poller.poll(["bench/quants"]))),
                           ("a fork carrying them", lambda: app.poller.poll(["bench/quants-fork"]))):
            server.reset_requests()
            act()
            reads = [r for r in server.requests if "/resolve/" in r.path and r.path.endswith(".gguf")]
            fetched = sum(_range_len(r.range) for r in reads)
            rounds.append((label, len(reads), fetched))
        app.store.engine.dispose()
    sizes = sum(f.size or 0 for f in files.values())
    detail(f"2. 20 GGUF quantizations ({sizes / 1e9:.1f} GB in all): {rounds}")
    (_, first_requests, first_bytes), (_, later, _), (_, fork, _) = rounds
    return {"20 quantizations, first time: requests per file": first_requests / 20,
            "20 quantizations, first time: MiB fetched per file": first_bytes / 20 / 2**20,
            "a later commit carrying them: requests": later, "a fork carrying them: requests": fork}


def _range_len(value: str | None) -> int:
    if not value or not value.startswith("bytes="):
        return 0
    a, _, b = value[6:].partition("-")
    return int(b) - int(a) + 1


def measure(size: int | None = None) -> dict[str, float]:
    configure_logging(LogSettings(level="warning"))
    with tempfile.TemporaryDirectory() as tmp:
        return figure_one(Path(tmp) / "one") | figure_two(Path(tmp) / "two", Path(tmp) / "hubwatch.db")


if __name__ == "__main__":
    run_alone(BENCHMARK, measure)
