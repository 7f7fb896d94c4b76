"""Figure: polling N unchanged repos costs N HTTP requests (counted at the replay server), N = 100.

Baseline: one request per repo, the floor for a per-repo head check. Prints the count and the ratio.
Run: .venv/bin/python benchmarks/bench_poll_unchanged.py
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._histories import CONFIG, replayed_app, write_repo

N = 100


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "histories"
        for i in range(N):
            write_repo(root, f"bench/model-{i:03d}", [{"files": {"config.json": CONFIG, "README.md": "# model\n"}}])
        with replayed_app(root, Path(tmp) / "h.db") as (app, server):
            for repo_id in server.repo_ids():
                app.store.add_watch(repo_id, "main", 900)
            app.poll()  # baselines
            server.reset_requests()
            started = time.perf_counter()
            outcomes = app.poll()
            elapsed = time.perf_counter() - started
            requests = server.count_requests()
    assert all(o.status == "unchanged" for o in outcomes), [o.error for o in outcomes if o.failed]
    print(f"unchanged repos polled:        {N}")
    print(f"HTTP requests at the replay:   {requests}")
    print(f"requests per repo:             {requests / N:.2f}  (baseline: 1 head check per repo; ratio {requests / N:.2f}x)")
    print(f"wall time for the pass:        {elapsed * 1000:.0f} ms ({elapsed * 1000 / N:.1f} ms per repo, loopback)")


if __name__ == "__main__":
    main()
