"""Figure: answers of the HTTP server fuzzed from its own OpenAPI document for a long run (goal: no 5xx, no
traceback logged, no failed check).

The Hub replay's two repos (the hostile fixture and Llama-3.1-8B-Instruct, every commit) are ingested by the
real pipeline, then served twice, each for `--minutes` (default 2) per server: in the default configuration
(reads open, no Hub webhook secret) and privately (read token, Hub webhook secret). schemathesis's engine runs
every phase (examples, coverage with undeclared methods, fuzzing, stateful links) with path parameters drawn
often from the stored repo ids and shas (tests/support/fuzzing.py; tests/feeds/test_openapi.py runs the same
for seconds). Prints, per server: requests, answers by status, 5xx, tracebacks logged, failed checks. Exits 1
on any 5xx, traceback or failed check.
Run: .venv/bin/python benchmarks/fuzz_api.py [--minutes 2] [--seed 1] [--max-examples 200]
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.fuzzing import FuzzReport, TracebackCounter, fuzz, history_values
from tests.support.served import API_TOKEN, READ_TOKEN, ingested_history, serve

SERVERS = {
    "default": {},
    "private": {"read_token": READ_TOKEN, "hub_webhook_secret": "s3cret"},
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=2.0, help="time per server")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--max-examples", type=int, default=200, help="generated cases per operation and phase")
    args = parser.parse_args()
    tracebacks = TracebackCounter()
    logging.getLogger().addHandler(tracebacks)
    bad = 0
    with tempfile.TemporaryDirectory() as folder, ingested_history(Path(folder) / "source") as history:
        for name, options in SERVERS.items():
            copy = history.copy_to(Path(tempfile.mkdtemp(dir=folder)))
            before = tracebacks.count
            with serve(copy.store(), api_token=API_TOKEN, trigger=lambda *_: True, allow_private_targets=True,
                       **options) as served:
                report = fuzz(served.url, history_values(served.store), headers={"Authorization": f"Bearer {API_TOKEN}"},
                              seed=args.seed, max_time_s=max(1, round(args.minutes * 60)), max_examples=args.max_examples)
            bad += _print(name, report, tracebacks.count - before)
    if tracebacks.first:
        print(f"first traceback:\n{tracebacks.first}")
    return 1 if bad else 0


def _print(name: str, report: FuzzReport, tracebacks: int) -> int:
    statuses = ", ".join(f"{status}: {n}" for status, n in sorted(report.statuses.items()))
    print(f"{name}: requests {report.requests}, operations {len(report.operations)}, 5xx {report.server_errors}, "
          f"tracebacks {tracebacks}, failed checks {len(report.failures)}, engine errors {len(report.errors)}")
    print(f"  statuses: {statuses}")
    for failure in sorted(set(report.failures))[:20]:
        print(f"  failed: {failure}")
    for error in report.errors[:5]:
        print(f"  error: {error}")
    return report.server_errors + tracebacks + len(report.failures)


if __name__ == "__main__":
    sys.exit(main())
