"""`python -m benchmarks`: list the declared benchmarks, run all or a selection, write the one results table.

    python -m benchmarks list [--tag TAG]
    python -m benchmarks page [--results benchmarks/results/results.json]   the docs' performance page (Markdown)
    python -m benchmarks run [NAME ...] [--tag quick|slow|gpu|...] [--out benchmarks/results/results.json]
                             [--fresh] [--check] [--small] [--size N] [--timeout S] [--machine TEXT]
                             [--not-run REASON] [--jobs N]

Each selected benchmark runs in a process of its own (`python -m benchmarks.runner child NAME`), under its
declared timeout; what it prints goes to `<out dir>/logs/NAME.log`, its figures come back as JSON. The results
(benchmarks/results/results.json and results.md beside it) keep the rows of benchmarks not run this time,
unless --fresh. With --check the command exits 1 when a row is short of its goal by more than its margin, or a benchmark failed or
timed out.
With --jobs N up to N benchmarks run at once, except those that run alone (`Benchmark.runs_alone`: a goal on a
time), which run first, one by one, with nothing beside them; the rows of the others say they ran N at a time.
`--tag quick` runs each benchmark at its declared `quick` size, if it has one (no --size, no --small).
CI runs the quick selection two at a time into a file of its own:
`python -m benchmarks run --tag quick --check --jobs 2 --out TMP`.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import fcntl
import importlib
import importlib.util
import json
import os
import pkgutil
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from benchmarks import table
from benchmarks.declare import Benchmark, rows_for

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "results.json"
PACKAGE = "benchmarks"
BROKEN = re.compile(r"not run: (failed|timed out)")  # a row of a benchmark that ran and measured nothing


@dataclass(frozen=True)
class Found:
    """A benchmark module found by discovery: its declaration, or why it could not be imported."""

    module: str
    benchmark: Benchmark | None
    error: str = ""

    @property
    def name(self) -> str:
        return self.benchmark.name if self.benchmark else self.module.rsplit(".", 1)[1].removeprefix("bench_")


def discover(package: str = PACKAGE) -> list[Found]:
    """Every `bench_*` module of the package, sorted by name, with its BENCHMARK (imported, not run)."""
    pkg = importlib.import_module(package)
    found = []
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
        if not info.name.startswith("bench_"):
            continue
        module_name = f"{package}.{info.name}"
        try:
            module = importlib.import_module(module_name)
        except Exception as err:  # noqa: BLE001 - a module that does not import is listed with why, the others still run
            found.append(Found(module_name, None, f"import failed: {type(err).__name__}: {err}"))
            continue
        declared = getattr(module, "BENCHMARK", None)
        if not isinstance(declared, Benchmark):
            found.append(Found(module_name, None, "declares no BENCHMARK"))
            continue
        if declared.name != info.name.removeprefix("bench_"):
            found.append(Found(module_name, None, f"BENCHMARK.name {declared.name!r} is not the module's name"))
            continue
        found.append(Found(module_name, declared))
    return found


def select(found: Sequence[Found], names: Sequence[str], tags: Sequence[str]) -> list[Found]:
    """By name (every name must exist) and/or by tag (a benchmark with any of the tags); nothing given: all."""
    by_name = {f.name: f for f in found}
    unknown = [n for n in names if n.removeprefix("bench_") not in by_name]
    if unknown:
        raise SystemExit(f"no such benchmark: {', '.join(unknown)} (python -m benchmarks list)")
    wanted = {n.removeprefix("bench_") for n in names}
    chosen = []
    for f in found:
        named = f.name in wanted
        tagged = bool(tags) and f.benchmark is not None and bool(set(tags) & set(f.benchmark.tags))
        if named or tagged or (not names and not tags):
            chosen.append(f)
    return chosen


def missing_requirements(benchmark: Benchmark) -> list[str]:
    """What this machine lacks of the benchmark's `requires`, each said as a reason."""
    missing = []
    for need in benchmark.requires:
        if need == "cuda":
            try:
                import torch
            except ImportError:
                missing.append("no CUDA device: torch is not installed")
                continue
            if not torch.cuda.is_available():
                missing.append("no CUDA device on this machine")
        elif need == "root" and os.geteuid() != 0:
            missing.append("needs root (binds port 443)")
        elif need == "postgres" and not (Path("/usr/lib/postgresql/15/bin/initdb").exists()
                                         or os.environ.get("HUBWATCH_BENCH_POSTGRES")):
            missing.append("no PostgreSQL server (/usr/lib/postgresql/15/bin or $HUBWATCH_BENCH_POSTGRES)")
        elif need == "torch" and importlib.util.find_spec("torch") is None:
            missing.append("needs torch (pip install -e '.[groundtruth]')")
        elif need == "accelerate" and importlib.util.find_spec("accelerate") is None:
            missing.append("needs accelerate (pip install -e '.[bench]')")
        elif need == "node" and shutil.which("node") is None:
            missing.append("needs node")
    return missing


def child(module_name: str, size: int | None, out: Path) -> None:
    """In the benchmark's own process: measure and write {"values": ..., "note": ...} to `out`."""
    module = importlib.import_module(module_name)
    benchmark: Benchmark = module.BENCHMARK
    missing = missing_requirements(benchmark)
    if missing:
        out.write_text(json.dumps({"values": {}, "note": "not run: " + "; ".join(missing)}))
        return
    started = time.monotonic()
    values = {name: None if value is None else float(value) for name, value in module.measure(size).items()}  # Decimal, bool, int
    rows_for(benchmark, values)  # undeclared figures fail here, in the benchmark's own process
    note = f"size {size}" if size is not None else ""
    out.write_text(json.dumps({"values": values, "note": note, "seconds": time.monotonic() - started}))


def run_one(found: Found, size: int | None, timeout_s: float | None, logs: Path, package_env: dict[str, str],
            beside: str = "") -> tuple[list[dict], float]:
    """Run one benchmark in its own process; its rows (each "not run" with the reason when it failed) and wall s.
    `beside` goes into its rows' notes (how many benchmarks ran at once)."""
    benchmark = found.benchmark
    assert benchmark is not None
    logs.mkdir(parents=True, exist_ok=True)
    log = logs / f"{benchmark.name}.log"
    limit = timeout_s or benchmark.timeout_s
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="hubwatch-bench-") as tmp, log.open("w") as log_file:
        out = Path(tmp) / "figures.json"
        argv = [sys.executable, "-m", "benchmarks.runner", "child", found.module, "--out", str(out)]
        if size is not None:
            argv += ["--size", str(size)]
        proc = subprocess.Popen(argv, cwd=ROOT, env=package_env, stdout=log_file, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            code = proc.wait(limit)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, 9)  # the benchmark's whole process group: servers and daemons it started too
            proc.wait()
            return rows_for(benchmark, {}, f"not run: timed out after {limit:.0f} s"), time.monotonic() - started
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, 15)  # anything it left behind
        seconds = time.monotonic() - started
        if code != 0 or not out.exists():
            tail = [line for line in log.read_text(errors="replace").splitlines() if line.strip()][-1:] or ["no output"]
            return rows_for(benchmark, {}, f"not run: failed (exit {code}): {tail[0][:200]}"), seconds
        got = json.loads(out.read_text())
    return rows_for(benchmark, got["values"], "; ".join(n for n in (got["note"], beside) if n)), seconds


def commit() -> str:
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False).stdout.strip()

    sha = git("rev-parse", "--short", "HEAD") or "unknown"
    return sha + ("+dirty" if git("status", "--porcelain", "--untracked-files=no") else "")


def machine() -> str:
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return f"{platform.node()}, {os.cpu_count()} cores, Python {platform.python_version()}, load average {load:.2f} at the start"


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Two runs writing one results file take turns (read, merge, write)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def run(args: argparse.Namespace) -> int:
    found = discover(args.package)
    chosen = select(found, args.names, args.tag)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)}
    if args.package_path:
        env["PYTHONPATH"] = os.pathsep.join([args.package_path, env["PYTHONPATH"]])
    env["HUBWATCH_BENCH_PACKAGE"] = args.package
    out = Path(args.out)
    logs = out.parent / "logs"
    done: dict[str, list[dict]] = {}
    runnable = []
    for f in chosen:
        if f.benchmark is None:
            print(f"{f.name}: skipped, {f.error}", file=sys.stderr)
        elif args.not_run:
            done[f.name] = rows_for(f.benchmark, {}, f"not run: {args.not_run}")
        else:
            runnable.append(f)

    def one(f: Found, beside: str = "") -> None:
        size = f.benchmark.small if args.small else args.size
        if size is None and "quick" in args.tag:  # the quick selection: the benchmark's quick size, if it has one
            size = f.benchmark.quick
        print(f"{f.name}: running{f' (size {size})' if size is not None else ''}", file=sys.stderr, flush=True)
        rows, seconds = run_one(f, size, args.timeout, logs, env, beside)
        done[f.name] = rows
        print(f"{f.name}: {seconds:.0f} s; " + ", ".join(f"{r['figure']} {table.number(r['value'])} {r['unit']} ({r['status']})"
                                                      for r in rows), file=sys.stderr, flush=True)

    if args.jobs > 1:  # the ones that run alone first, one by one; then the others up to N at a time
        for f in [f for f in runnable if f.benchmark.runs_alone]:
            one(f)
        shared = [f for f in runnable if not f.benchmark.runs_alone]
        with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:  # each thread waits on a process
            for future in [pool.submit(one, f, f"run {args.jobs} at a time") for f in shared]:
                future.result()
    else:
        for f in runnable:
            one(f)
    new_rows = [row for f in chosen for row in done.get(f.name, [])]
    known = [f.name for f in found]
    with locked(out):
        old = None if args.fresh else table.read(out)
        rows = table.merged(old["rows"] if old else [], new_rows, known)
        doc = table.document(rows, datetime.now(UTC).isoformat(timespec="seconds"), commit(), args.machine or machine())
        table.write(out, doc)
    print(table.text_table(new_rows))
    print(f"results: {out} and {out.with_suffix('.md')}")
    short = [r for r in new_rows if r["status"] == "short"]
    # A benchmark that failed or timed out measured nothing: with --check that fails like a short figure (one the
    # machine cannot run, `requires`, is not run without failing).
    broken = sorted({r["benchmark"] for r in new_rows if r["status"] == "not run" and BROKEN.search(r.get("note") or "")})
    if args.check and (short or broken):
        for r in short:
            print(f"SHORT: {r['benchmark']} / {r['figure']}: {table.number(r['value'])} {r['unit']} against the goal "
                  f"{table.goal_text(r)}", file=sys.stderr)
        for name in broken:
            print(f"BROKEN: {name} failed or timed out (its log: {out.parent / 'logs' / (name + '.log')})", file=sys.stderr)
        return 1
    return 0


def list_benchmarks(args: argparse.Namespace) -> int:
    found = select(discover(args.package), [], args.tag)
    for f in found:
        if f.benchmark is None:
            print(f"{f.name:<24} ({f.error})")
            continue
        b = f.benchmark
        print(f"{b.name:<24} [{', '.join(b.tags)}]{'  requires ' + ', '.join(b.requires) if b.requires else ''}")
        print(f"    {b.about}")
        for fig in b.figures:
            goal = "no goal" if fig.goal is None else f"goal {'<=' if fig.direction == 'lower' else '>='} {table.number(fig.goal)}"
            print(f"    - {fig.name} ({fig.unit}; {goal})")
    return 0


def _jobs(text: str) -> int:
    try:
        jobs = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a whole number of benchmarks at once, not {text!r}") from None
    if jobs < 1:
        raise argparse.ArgumentTypeError(f"at least 1 benchmark at a time, not {jobs}")
    return jobs


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    parser.add_argument("--package", default=os.environ.get("HUBWATCH_BENCH_PACKAGE", PACKAGE), help=argparse.SUPPRESS)
    parser.add_argument("--package-path", default="", help=argparse.SUPPRESS)
    sub = parser.add_subparsers(dest="command", required=True)
    listing = sub.add_parser("list", help="the benchmarks, their tags and figures")
    listing.add_argument("--tag", action="append", default=[])
    running = sub.add_parser("run", help="run benchmarks and write the results table")
    running.add_argument("names", nargs="*", help="benchmark names (bench_ prefix optional)")
    running.add_argument("--tag", action="append", default=[], help="quick, slow, gpu, or another declared tag")
    running.add_argument("--out", default=str(DEFAULT_OUT), help="results JSON (the Markdown goes beside it)")
    running.add_argument("--fresh", action="store_true", help="do not keep rows of benchmarks not run this time")
    running.add_argument("--check", action="store_true", help="exit 1 when a figure is short of its goal")
    running.add_argument("--small", action="store_true", help="each benchmark at its declared small size (a smoke run)")
    running.add_argument("--size", type=int, default=None, help="measure(size) for every selected benchmark")
    running.add_argument("--timeout", type=float, default=None, help="seconds per benchmark (default: its own)")
    running.add_argument("--machine", default="", help="what the results say about the machine")
    running.add_argument("--not-run", default="", metavar="REASON",
                         help="write the selected benchmarks' rows as 'not run' with this reason, without running them")
    running.add_argument("--jobs", type=_jobs, default=1, metavar="N",
                         help="run up to N benchmarks at once; a benchmark with a goal on a time still runs alone")
    page = sub.add_parser("page", help="the performance page (Markdown) from a results file, on stdout")
    page.add_argument("--results", default=str(DEFAULT_OUT))
    kid = sub.add_parser("child", help=argparse.SUPPRESS)
    kid.add_argument("module")
    kid.add_argument("--out", required=True)
    kid.add_argument("--size", type=int, default=None)
    args = parser.parse_args(argv)
    if args.command == "list":
        return list_benchmarks(args)
    if args.command == "page":
        doc = table.read(Path(args.results))
        if doc is None:
            raise SystemExit(f"no results file at {args.results}: python -m benchmarks run")
        sys.stdout.write(table.markdown(doc))
        return 0
    if args.command == "child":
        child(args.module, args.size, Path(args.out))
        return 0
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
