"""Figure: several `hubwatch run` workers on one PostgreSQL database, with 1,000 repos moving on the Hub
replay server ([poll] coordination = "shared", the listing finding the moves, webhooks to a recording
receiver; tests/support/fleet.py).

Prints, for one worker and for three (the baseline is one worker):
- revisions ingested per minute while the repos move (each repo moves `--moves` commits after its
  baseline), and the ratio three workers / one; the workers' CPU per revision (a machine with fewer cores
  than workers, the replay server and PostgreSQL need is CPU-bound whatever the worker count);
- with one of the three killed by SIGKILL while it holds leases: how many watches it held, the time until
  the others had taken every one of them over (goal: seconds: the lease, 5 s here, plus a claim tick);
- duplicates: revisions or events stored twice (goal: 0), deliveries lost (goal: 0) and webhook-ids
  received twice (a send the kill cut mid-way is sent again with the same webhook-id, as the outbox
  promises: at least once, never a second delivery id).

--event-lock: the price of storage/event_log.py's advisory lock (events commit in seq order): the workers run
once with it and once without it (benchmarks/event_lock_off/sitecustomize.py, loaded through PYTHONPATH with
HUBWATCH_BENCH_EVENT_LOCK=off), and revisions a second are printed for both; nothing else is run (a script
option, not a declared figure: results/bench_workers_event_lock.txt holds its runs, with / without 0.74x-0.77x).

PostgreSQL: --postgres ADMIN_URL (or $HUBWATCH_BENCH_POSTGRES), else a throwaway server is started from
/usr/lib/postgresql/15/bin (as .ci/run does). Each run gets a fresh database.
Run: python -m benchmarks run workers   (size: repos, default 1,000; 1 move each, 3 workers)
     .venv/bin/python benchmarks/bench_workers.py --event-lock [--repos 150 --moves 2]
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


from benchmarks.declare import Benchmark, Figure, detail, run_alone
from tests.support import postgres_server
from tests.support.databases import postgres_database
from tests.support.fleet import Fleet, Outcome, write_moving_repos

ZERO = "goal 0, as this benchmark states"
BENCHMARK = Benchmark(
    name="workers",
    about="Several `hubwatch run` workers on one PostgreSQL with 1,000 repos moving: throughput, CPU, a killed worker",
    tags=("slow", "daemon", "postgres"),
    size="repos (default 1,000)",
    small=100,
    requires=("postgres",),
    timeout_s=3600,
    figures=(
        Figure("revisions a minute while moving, 1 worker", "rev/min", direction="higher"),
        Figure("revisions a minute while moving, 3 workers", "rev/min", direction="higher"),
        Figure("3 workers / 1 worker", "ratio", direction="higher", note="2 cores for workers, replay and PostgreSQL"),
        Figure("workers' CPU per revision, 1 worker", "ms", baseline=113.0, baseline_at="issue 27 (a whole worker's CPU)"),
        Figure("workers' CPU per revision, 3 workers", "ms", baseline=113.0, baseline_at="issue 27 (a whole worker's CPU)"),
        Figure("killed worker's leases all taken over after", "s", note="goal in seconds: the 5 s lease plus a claim tick"),
        Figure("duplicated revisions, all runs", "revisions", goal=0, note=ZERO),
        Figure("duplicated events, all runs", "events", goal=0, note=ZERO),
        Figure("deliveries lost, all runs", "deliveries", goal=0, note=ZERO),
        Figure("webhook-ids received twice, one killed", "deliveries", note="at least once: a send cut mid-way goes again"),
    ),
)


@contextmanager
def throwaway_postgres() -> Iterator[str]:
    """A PostgreSQL server on loopback for this run (tests/support/postgres_server.py)."""
    with postgres_server.throwaway_postgres(max_connections=200, synchronous_commit=False) as server:
        yield server.url


def _run(admin_url: str, workdir: Path, histories: Path, ids: list[str], workers: int, moves: int, kill: bool) -> Outcome:
    with postgres_database(admin_url, prefix="hw_bench") as url:
        fleet = Fleet(workdir / f"w{workers}{'-kill' if kill else ''}", histories, ids, url, workers)
        out = fleet.run(moves=moves, kill_one=kill, timeout_s=3600)
    detail(f"  {workers} worker(s){', one killed' if kill else ''}: baselines {out.baseline_s:.0f} s;"
          f" {out.moved_revisions} moved revisions in {out.moved_s:.0f} s = {out.moved_per_min:.0f} a minute;"
          f" all delivered after {out.delivered_s:.0f} s; workers' CPU {out.worker_cpu_s:.0f} s"
          f" ({out.cpu_ms_per_revision:.0f} ms a revision, delivery included)")
    return out


def measure(size: int | None = None, moves: int = 1) -> dict[str, float]:
    repos, workers = size or 1000, 3
    admin_given = os.environ.get("HUBWATCH_BENCH_POSTGRES")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stopped: the throwaway server and workers go too
    with tempfile.TemporaryDirectory() as tmp:
        histories = Path(tmp) / "histories"
        ids = write_moving_repos(histories, repos, 1 + moves)
        detail(f"{repos} repos, each moving {moves} commit(s) after its baseline; PostgreSQL; machine: {os.cpu_count()} cores")
        with (throwaway_postgres() if not admin_given else _given(admin_given)) as admin:
            one = _run(admin, Path(tmp), histories, ids, 1, moves, kill=False)
            many = _run(admin, Path(tmp), histories, ids, workers, moves, kill=False)
            killed = _run(admin, Path(tmp), histories, ids, workers, moves, kill=True)
    runs = (one, many, killed)
    return {"revisions a minute while moving, 1 worker": one.moved_per_min,
            "revisions a minute while moving, 3 workers": many.moved_per_min,
            "3 workers / 1 worker": many.moved_per_min / one.moved_per_min,
            "workers' CPU per revision, 1 worker": one.cpu_ms_per_revision,
            "workers' CPU per revision, 3 workers": many.cpu_ms_per_revision,
            "killed worker's leases all taken over after": killed.takeover_s,
            "duplicated revisions, all runs": sum(o.duplicate_revisions for o in runs),
            "duplicated events, all runs": sum(o.duplicate_events for o in runs),
            "deliveries lost, all runs": sum(o.deliveries_expected - o.deliveries_received for o in runs),
            "webhook-ids received twice, one killed": killed.deliveries_redundant}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repos", type=int, default=1000)
    parser.add_argument("--moves", type=int, default=1, help="commits each repo moves after its baseline")
    parser.add_argument("--workers", type=int, default=3, help="--event-lock only (the declared figures are for 3)")
    parser.add_argument("--postgres", default=os.environ.get("HUBWATCH_BENCH_POSTGRES"))
    parser.add_argument("--event-lock", action="store_true", help="only: the workers with and without the event lock")
    args = parser.parse_args()
    if args.event_lock:
        price_event_lock(args)
        return
    if args.postgres:
        os.environ["HUBWATCH_BENCH_POSTGRES"] = args.postgres
    run_alone(BENCHMARK, lambda size: measure(size, args.moves), [f"--size={args.repos}"])


def price_event_lock(args: argparse.Namespace) -> None:
    """`args.workers` workers, the same moves, with the event-writes lock and without it: revisions a second."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    hook = str(Path(__file__).resolve().parent / "event_lock_off")
    with tempfile.TemporaryDirectory() as tmp:
        histories = Path(tmp) / "histories"
        ids = write_moving_repos(histories, args.repos, 1 + args.moves)
        print(f"{args.repos} repos, each moving {args.moves} commit(s) after its baseline; {args.workers} workers on "
              f"PostgreSQL; machine: {os.cpu_count()} cores, shared with other work (figures are noisy)", flush=True)
        rates = {}
        with (throwaway_postgres() if not args.postgres else _given(args.postgres)) as admin:
            for lock in ("on", "off", "on", "off"):  # twice each, interleaved: the machine's load drifts
                os.environ["HUBWATCH_BENCH_EVENT_LOCK"] = lock
                os.environ["PYTHONPATH"] = hook if lock == "off" else ""
                detail(f"event lock {lock}:")
                out = _run(admin, Path(tmp) / f"lock-{lock}-{len(rates.get(lock, []))}", histories, ids, args.workers,
                           args.moves, kill=False)
                lost = out.deliveries_expected - out.deliveries_received
                detail(f"    revisions {out.revisions}/{out.revisions_expected}, deliveries lost {lost}")
                rates.setdefault(lock, []).append(out.moved_revisions / out.moved_s)
    on, off = (max(rates[k]) for k in ("on", "off"))
    print(f"revisions a second while moving (best of {len(rates['on'])}): with the event lock {on:.2f}, without it"
          f" {off:.2f} (with / without: {on / off:.2f}x)")


@contextmanager
def _given(url: str) -> Iterator[str]:
    yield url


if __name__ == "__main__":
    main()
