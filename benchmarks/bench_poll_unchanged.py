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

from benchmarks._histories import CONFIG, write_repo  # noqa: E402
from tracker.advisories.fake import OsvFake  # noqa: E402
from tracker.app import App  # noqa: E402
from tracker.config import settings_from_mapping  # noqa: E402
from tracker.logs import configure_logging  # noqa: E402
from tracker.replay.server import ReplayServer  # noqa: E402

N = 100


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "histories"
        for i in range(N):
            write_repo(root, f"bench/model-{i:03d}", [{"files": {"config.json": CONFIG, "README.md": "# model\n"}}])
        with ReplayServer(roots=[root]) as server, OsvFake() as osv:
            settings = settings_from_mapping(
                {"hub": {"endpoint": server.endpoint}, "storage": {"url": f"sqlite:///{tmp}/h.db"},
                 "osv": {"api_url": osv.endpoint},
                 "log": {"level": "warning"}},
                env={},
            )
            configure_logging(settings.log)
            app = App(settings)
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
