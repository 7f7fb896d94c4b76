"""Figure: what the bundled histories' stand-in pickles cost the scanner (issue 22, follow-up 2).

The replay serves weight files it has no bytes for as zeros (tracker/standins/replay/FORMAT.md): MiniLM's
pytorch_model.bin and CLIP's open_clip_pytorch_model.bin are such files. A plain or legacy pickle is read from its
first bytes; before this figure's change the scanner read the 16 MiB cap at once and kept those bytes in the blob
store; now it reads in growing chunks and stops at the first byte that is not a pickle opcode. Each file is scanned
through HubClient.open_range on the replay, as ingest does (best of N runs): bytes fetched, requests, bytes kept,
time, and the ratio of bytes fetched to the old 16 MiB read (the baseline).
Run: python -m benchmarks run formats_zero_pickles   (size: runs per file, default 5)
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.declare import Benchmark, Figure, detail, run_alone
from tests.support.replay import replay_server
from tracker.formats.pickle_files import HEAD_CAP
from tracker.formats.registry import run_scan, scanner_for
from tracker.hub.client import HubClient

FILES = [("sentence-transformers/all-MiniLM-L6-v2", 1, "pytorch_model.bin"),
         ("laion/CLIP-ViT-B-32-laion2B-s34B-b79K", 3, "open_clip_pytorch_model.bin")]
BEFORE = "before: the 16 MiB cap read at once, and kept"


def _figures() -> tuple[Figure, ...]:
    out: list[Figure] = []
    for _, _, path in FILES:
        out += [Figure(f"{path}: bytes fetched", "bytes", baseline=float(HEAD_CAP), baseline_at=BEFORE),
                Figure(f"{path}: requests", "requests"),
                Figure(f"{path}: bytes kept", "bytes", baseline=float(HEAD_CAP), baseline_at=BEFORE),
                Figure(f"{path}: scan time, best", "ms")]
    return tuple(out)


BENCHMARK = Benchmark(
    name="formats_zero_pickles",
    about="What the bundled histories' stand-in pickles (served as zeros) cost the scanner through HubClient.open_range",
    tags=("quick", "formats"),
    size="runs per file (default 5)",
    small=2,
    figures=_figures(),
)


def measure(size: int | None = None) -> dict[str, float]:
    runs = size or 5
    figures: dict[str, float] = {}
    with replay_server() as replay:
        hub = HubClient(endpoint=replay.endpoint)
        for repo_id, head, path in FILES:
            replay.set_head(repo_id, head)
            sha = replay.head_sha(repo_id)
            entry = {f.path: f for f in hub.list_files(repo_id, sha)}[path]
            spec = scanner_for(path)
            assert spec is not None and entry.lfs_size is not None
            times = []
            for _ in range(runs):
                source = hub.open_range(repo_id, sha, path, entry.lfs_size, spec.budget, first_block=spec.read_ahead,
                                        max_block=spec.read_ahead)
                started = time.perf_counter()
                scan, kept = run_scan(spec, source, path)
                times.append((time.perf_counter() - started) * 1000)
            figures |= {f"{path}: bytes fetched": scan.bytes_read, f"{path}: requests": source.requests,
                        f"{path}: bytes kept": len(kept), f"{path}: scan time, best": min(times)}
            detail(f"{repo_id}: {path} ({entry.lfs_size:,} B of zeros): fetched {scan.bytes_read:,} B in "
                  f"{source.requests} request(s), kept {len(kept):,} B, best {min(times):.1f} ms of {runs}; "
                  f"verdict {scan.result.get('verdict')}; fetched / old 16 MiB read = {scan.bytes_read / HEAD_CAP:.4f}")

    return figures


if __name__ == "__main__":
    run_alone(BENCHMARK, measure)
