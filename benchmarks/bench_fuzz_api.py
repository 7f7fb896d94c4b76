"""Figure: answers of the HTTP server fuzzed from its own OpenAPI document for a long run (goal: no 5xx, no
traceback logged, no failed check).

The Hub replay's two repos (the hostile fixture and Llama-3.1-8B-Instruct, every commit) are ingested by the
real pipeline, then served twice, each for `--minutes` (default 2) per server: in the default configuration
(reads open, no Hub webhook secret) and privately (read token, Hub webhook secret). schemathesis's engine runs
every phase (examples, coverage with undeclared methods, fuzzing, stateful links) with path parameters drawn
often from the stored repo ids and shas (tests/support/fuzzing.py; tests/feeds/test_openapi.py runs the same
for seconds). Prints, per server: requests, answers by status, 5xx, tracebacks logged, failed checks. Exits 1
on any 5xx, traceback or failed check.
Run: python -m benchmarks run fuzz_api   (size: seconds per server, default 120)
"""

from __future__ import annotations

import logging
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.declare import Benchmark, Figure, detail, run_alone
from tests.support.fuzzing import FuzzReport, TracebackCounter, fuzz, history_values
from tests.support.served import API_TOKEN, READ_TOKEN, ingested_history, serve

SERVERS = {
    "default": {},
    "private": {"read_token": READ_TOKEN, "hub_webhook_secret": "s3cret"},
}


SEED, MAX_EXAMPLES = 1, 200  # generated cases per operation and phase
BENCHMARK = Benchmark(
    name="fuzz_api",
    about="The HTTP server fuzzed from its OpenAPI document, default and private configuration, 2 minutes each",
    tags=("slow", "feeds"),
    size="seconds per server (default 120)",
    small=15,
    timeout_s=900,
    figures=(
        *(Figure(f"{name}: answers 5xx", "answers", goal=0.0) for name in SERVERS),
        *(Figure(f"{name}: tracebacks logged", "tracebacks", goal=0.0) for name in SERVERS),
        *(Figure(f"{name}: failed checks", "checks", goal=0.0) for name in SERVERS),
        *(Figure(f"{name}: requests", "requests", note="how many depends on the machine") for name in SERVERS),
    ),
)


def measure(size: int | None = None) -> dict[str, float]:
    seconds = size or 120
    tracebacks = TracebackCounter()
    logging.getLogger().addHandler(tracebacks)
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as folder, ingested_history(Path(folder) / "source") as history:
        for name, options in SERVERS.items():
            copy = history.copy_to(Path(tempfile.mkdtemp(dir=folder)))
            before = tracebacks.count
            with serve(copy.store(), api_token=API_TOKEN, trigger=lambda *_: True, allow_private_targets=True,
                       **options) as served:
                report = fuzz(served.url, history_values(served.store), headers={"Authorization": f"Bearer {API_TOKEN}"},
                              seed=SEED, max_time_s=max(1, seconds), max_examples=MAX_EXAMPLES)
            _print(name, report, tracebacks.count - before)
            figures |= {f"{name}: answers 5xx": report.server_errors, f"{name}: tracebacks logged": tracebacks.count - before,
                        f"{name}: failed checks": len(report.failures), f"{name}: requests": report.requests}
    if tracebacks.first:
        detail(f"first traceback:\n{tracebacks.first}")
    return figures


def _print(name: str, report: FuzzReport, tracebacks: int) -> None:
    statuses = ", ".join(f"{status}: {n}" for status, n in sorted(report.statuses.items()))
    detail(f"{name}: requests {report.requests}, operations {len(report.operations)}, 5xx {report.server_errors}, "
          f"tracebacks {tracebacks}, failed checks {len(report.failures)}, engine errors {len(report.errors)}")
    detail(f"  statuses: {statuses}")
    for failure in sorted(set(report.failures))[:20]:
        detail(f"  failed: {failure}")
    for error in report.errors[:5]:
        detail(f"  error: {error}")


if __name__ == "__main__":
    run_alone(BENCHMARK, measure)
