"""The benchmark runner on tiny fake benchmark packages: selection, status, the results files, merging, --check.

Nothing here times anything: the fake benchmarks return fixed figures (or fail, or sleep past their timeout)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from benchmarks import runner, table
from benchmarks.declare import Benchmark, Figure, row, rows_for, status_of

ROOT = Path(__file__).resolve().parents[2]

FAKES = {
    "bench_fast": '''
        from benchmarks.declare import Benchmark, Figure
        BENCHMARK = Benchmark(name="fast", about="a fixed figure", tags=("quick", "api"), small=2, quick=3,
                              figures=(Figure("latency", "ms", goal=10.0, margin=0.5, baseline=20.0, baseline_at="c0ffee"),
                                       Figure("size seen", "units")))
        def measure(size=None):
            return {"latency": 12.0, "size seen": size if size is not None else -1}
    ''',
    "bench_short": '''
        from benchmarks.declare import Benchmark, Figure
        BENCHMARK = Benchmark(name="short", about="misses its goal", tags=("quick",),
                              figures=(Figure("throughput", "req/s", goal=100.0, direction="higher", margin=0.1),))
        def measure(size=None):
            return {"throughput": 50.0}
    ''',
    "bench_broken": '''
        from benchmarks.declare import Benchmark, Figure
        BENCHMARK = Benchmark(name="broken", about="raises", tags=("slow",), figures=(Figure("x", "s", goal=1.0),))
        def measure(size=None):
            raise RuntimeError("the fake fails")
    ''',
    "bench_sleepy": '''
        import threading
        from benchmarks.declare import Benchmark, Figure
        BENCHMARK = Benchmark(name="sleepy", about="outlives its timeout", tags=("slow",), timeout_s=1,
                              figures=(Figure("x", "s"),))
        def measure(size=None):
            threading.Event().wait(60)  # blocks past the 1 s timeout: the runner must end it
            return {"x": 1.0}
    ''',
    "bench_card": '''
        from benchmarks.declare import Benchmark, Figure
        BENCHMARK = Benchmark(name="card", about="needs a GPU", tags=("gpu",), requires=("cuda",),
                              figures=(Figure("peak", "GiB", goal=1.0),))
        def measure(size=None):
            return {"peak": 0.5}
    ''',
    "helper_not_listed": "VALUE = 1\n",
}


@pytest.fixture
def fakes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A package `fakebench` of fake benchmark modules on sys.path; returns the folder that holds it."""
    package = tmp_path / "fakebench"
    package.mkdir()
    (package / "__init__.py").write_text("")
    for name, text in FAKES.items():
        (package / f"{name}.py").write_text(textwrap.dedent(text))
    monkeypatch.syspath_prepend(str(tmp_path))
    for module in [m for m in sys.modules if m.startswith("fakebench")]:
        monkeypatch.delitem(sys.modules, module)
    return tmp_path


def run_cli(fakes: Path, *args: str) -> subprocess.CompletedProcess:
    """`python -m benchmarks --package fakebench ARGS` in a subprocess, as CI runs it."""
    return subprocess.run([sys.executable, "-m", "benchmarks", "--package", "fakebench", "--package-path", str(fakes), *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{fakes}:{ROOT}"})


@pytest.mark.parametrize(("value", "goal", "direction", "margin", "expected"), [
    (None, 10.0, "lower", 0.0, "not run"),
    (float("nan"), 10.0, "lower", 0.0, "not run"),
    (5.0, None, "lower", 0.0, "no goal"),
    (10.0, 10.0, "lower", 0.0, "pass"),
    (10.1, 10.0, "lower", 0.0, "short"),
    (14.9, 10.0, "lower", 0.5, "pass"),
    (15.1, 10.0, "lower", 0.5, "short"),
    (0.0, 0.0, "lower", 0.5, "pass"),
    (1.0, 0.0, "lower", 0.5, "short"),
    (95.0, 100.0, "higher", 0.1, "pass"),
    (89.0, 100.0, "higher", 0.1, "short"),
    (120.0, 100.0, "higher", 0.0, "pass"),
])
def test_status(value: float | None, goal: float | None, direction: str, margin: float, expected: str) -> None:
    """A figure is short only when it misses its goal by more than its noise margin, in its direction."""
    assert status_of(value, goal, direction, margin) == expected  # type: ignore[arg-type]


def test_row_ratio_and_note() -> None:
    """A row carries value / baseline as its ratio, and says where the baseline was measured."""
    bench = Benchmark(name="b", about="", tags=("quick",), figures=(Figure("f", "ms", goal=5.0, baseline=20.0, baseline_at="abc"),))
    got = row(bench, bench.figures[0], 10.0, "size 3")
    assert got["ratio"] == 0.5 and got["status"] == "short" and got["note"] == "baseline: abc; size 3"
    assert set(got) == {"benchmark", "figure", "unit", "value", "baseline", "ratio", "goal", "direction", "margin", "status",
                        "tags", "note"}


def test_undeclared_figure_is_refused() -> None:
    """A benchmark that reports a figure it does not declare fails instead of printing free text."""
    bench = Benchmark(name="b", about="", figures=(Figure("f", "ms"),))
    with pytest.raises(ValueError, match="does not declare"):
        rows_for(bench, {"g": 1.0})
    assert rows_for(bench, {})[0]["status"] == "not run"


def test_declarations_are_checked() -> None:
    """Duplicate figures, no figures and quick-and-slow are refused when declared."""
    with pytest.raises(ValueError):
        Benchmark(name="b", about="", figures=(Figure("f", "ms"), Figure("f", "s")))
    with pytest.raises(ValueError):
        Benchmark(name="b", about="", figures=())
    with pytest.raises(ValueError):
        Benchmark(name="b", about="", tags=("quick", "slow"), figures=(Figure("f", "ms"),))
    with pytest.raises(ValueError):
        Figure("f", "ms", direction="up")  # type: ignore[arg-type]


def test_discover_and_select(fakes: Path) -> None:
    """Discovery finds the bench_ modules only; selection is by name (bench_ prefix optional) or by any tag."""
    found = runner.discover("fakebench")
    assert [f.name for f in found] == ["broken", "card", "fast", "short", "sleepy"]
    assert [f.name for f in runner.select(found, ["bench_fast"], [])] == ["fast"]
    assert [f.name for f in runner.select(found, [], ["quick"])] == ["fast", "short"]
    assert [f.name for f in runner.select(found, ["card"], ["quick"])] == ["card", "fast", "short"]
    assert len(runner.select(found, [], [])) == 5
    with pytest.raises(SystemExit, match="no such benchmark: nope"):
        runner.select(found, ["nope"], [])


def test_list(fakes: Path) -> None:
    """`list` shows each benchmark's tags and figures with their goals."""
    done = run_cli(fakes, "list", "--tag", "quick")
    assert done.returncode == 0, done.stderr
    assert "fast" in done.stdout and "latency (ms; goal <= 10)" in done.stdout and "sleepy" not in done.stdout


def test_run_writes_json_and_markdown(fakes: Path, tmp_path: Path) -> None:
    """A run writes the fixed JSON shape and the Markdown table beside it; failures and timeouts are 'not run' rows."""
    out = tmp_path / "results" / "results.json"
    done = run_cli(fakes, "run", "--out", str(out), "--machine", "test machine", "--size", "7")
    assert done.returncode == 0, done.stderr
    doc = json.loads(out.read_text())
    assert set(doc) == {"generated_at", "commit", "machine", "rows"} and doc["machine"] == "test machine"
    rows = {(r["benchmark"], r["figure"]): r for r in doc["rows"]}
    assert rows["fast", "latency"]["status"] == "pass" and rows["fast", "latency"]["ratio"] == 0.6
    assert rows["fast", "size seen"]["value"] == 7 and rows["fast", "size seen"]["status"] == "no goal"
    assert rows["short", "throughput"]["status"] == "short"
    assert rows["broken", "x"]["status"] == "not run" and "the fake fails" in rows["broken", "x"]["note"]
    assert rows["sleepy", "x"]["status"] == "not run" and "timed out" in rows["sleepy", "x"]["note"]
    assert rows["card", "peak"]["status"] == "not run" and "CUDA" in rows["card", "peak"]["note"]
    markdown = out.with_suffix(".md").read_text()
    assert "| fast | latency | 12 | ms | 20 | 0.6x | ≤ 10 (±50%) | pass |" in markdown
    assert "1 pass, 1 short" in markdown
    assert (out.parent / "logs" / "broken.log").exists()
    page = run_cli(fakes, "page", "--results", str(out))
    assert page.returncode == 0 and page.stdout == markdown


def test_merge_keeps_rows_of_benchmarks_not_run(fakes: Path, tmp_path: Path) -> None:
    """Running some benchmarks by name keeps the other benchmarks' rows from the earlier file, unless --fresh."""
    out = tmp_path / "results.json"
    assert run_cli(fakes, "run", "fast", "short", "--out", str(out)).returncode == 0
    assert run_cli(fakes, "run", "fast", "--small", "--out", str(out)).returncode == 0
    rows = json.loads(out.read_text())["rows"]
    assert [(r["benchmark"], r["figure"]) for r in rows] == [("fast", "latency"), ("fast", "size seen"), ("short", "throughput")]
    assert rows[1]["value"] == 2 and rows[1]["note"] == "size 2"
    assert run_cli(fakes, "run", "fast", "--fresh", "--out", str(out)).returncode == 0
    assert {r["benchmark"] for r in json.loads(out.read_text())["rows"]} == {"fast"}


def test_not_run_with_a_reason(fakes: Path, tmp_path: Path) -> None:
    """--not-run writes the selected benchmarks' rows as 'not run' with the reason given, running nothing."""
    out = tmp_path / "results.json"
    assert run_cli(fakes, "run", "sleepy", "--not-run", "takes an hour", "--out", str(out)).returncode == 0
    [got] = json.loads(out.read_text())["rows"]
    assert got["status"] == "not run" and got["note"] == "not run: takes an hour"
    assert not (tmp_path / "logs" / "sleepy.log").exists()


def test_merged_order_and_stale_rows() -> None:
    """Merged rows follow the declared order; rows of benchmarks no longer declared are dropped."""
    old = [{"benchmark": "gone"}, {"benchmark": "b", "v": 1}, {"benchmark": "a", "v": 1}]
    new = [{"benchmark": "a", "v": 2}]
    assert table.merged(old, new, ["a", "b"]) == [{"benchmark": "a", "v": 2}, {"benchmark": "b", "v": 1}]


def test_check_exit_code(fakes: Path, tmp_path: Path) -> None:
    """--check exits 1 and names the short figure when a figure misses its goal by more than its margin, 0 otherwise."""
    out = tmp_path / "results.json"
    short = run_cli(fakes, "run", "--tag", "quick", "--check", "--out", str(out))
    assert short.returncode == 1 and "SHORT: short / throughput: 50" in short.stderr
    fine = run_cli(fakes, "run", "fast", "--check", "--out", str(out))
    assert fine.returncode == 0, fine.stderr


def test_check_fails_a_benchmark_that_failed_or_timed_out(fakes: Path, tmp_path: Path) -> None:
    """--check exits 1 when a selected benchmark raised or outlived its timeout (it measured nothing: a quick
    benchmark broken by a new fixture must fail CI, not pass it as 'not run'); a GPU benchmark on a machine without
    a card is not run without failing."""
    out = tmp_path / "results.json"
    for name in ("broken", "sleepy"):
        got = run_cli(fakes, "run", name, "--check", "--out", str(out))
        assert got.returncode == 1 and f"BROKEN: {name} failed or timed out" in got.stderr, got.stderr
    card = run_cli(fakes, "run", "card", "--check", "--out", str(out))
    assert card.returncode == 0 and "BROKEN" not in card.stderr, card.stderr


def test_the_real_declarations() -> None:
    """Every module of benchmarks/ named bench_* imports and declares a benchmark; tags are quick, slow or gpu plus others."""
    found = runner.discover()
    assert found and all(f.benchmark is not None for f in found), [f.error for f in found if f.benchmark is None]
    for f in found:
        kinds = {"quick", "slow", "gpu"} & set(f.benchmark.tags)
        assert len(kinds) == 1, (f.name, f.benchmark.tags)


PAIR_FAKES = {
    # two benchmarks that each wait for the other to have started: both see it only when they run at once
    **{f"bench_pair_{me}": f'''
        import threading
        from pathlib import Path
        from benchmarks.declare import Benchmark, Figure
        BENCHMARK = Benchmark(name="pair_{me}", about="meets pair_{other}", tags=("quick",),
                              figures=(Figure("met the other", "bool"), Figure("count", "requests", goal=1.0)))
        def measure(size=None):
            here = Path(__file__).parent
            (here / "{me}.started").write_text("")
            for _ in range(200):  # 20 s at most
                if (here / "{other}.started").exists():
                    return {{"met the other": 1.0, "count": 1.0}}
                threading.Event().wait(0.1)
            return {{"met the other": 0.0, "count": 1.0}}
    ''' for me, other in (("a", "b"), ("b", "a"))},
    "bench_timed": '''
        from pathlib import Path
        from benchmarks.declare import Benchmark, Figure
        BENCHMARK = Benchmark(name="timed", about="a goal on a time: runs alone, before the others", tags=("quick",),
                              figures=(Figure("others started", "benchmarks"), Figure("latency", "ms", goal=10.0)))
        def measure(size=None):
            return {"others started": float(len(list(Path(__file__).parent.glob("*.started")))), "latency": 1.0}
    ''',
}


def test_jobs_runs_benchmarks_at_once_and_timed_ones_alone(tmp_path: Path) -> None:
    """--jobs 2 runs two benchmarks at once (each sees the other start), and one with a goal on a time first, with
    nothing beside it; the rows of those run together say so."""
    package = tmp_path / "pairbench"
    package.mkdir()
    (package / "__init__.py").write_text("")
    for name, text in PAIR_FAKES.items():
        (package / f"{name}.py").write_text(textwrap.dedent(text))
    out = tmp_path / "results.json"
    done = subprocess.run([sys.executable, "-m", "benchmarks", "--package", "pairbench", "--package-path", str(tmp_path),
                           "run", "--jobs", "2", "--out", str(out)], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{tmp_path}:{ROOT}"})
    assert done.returncode == 0, done.stderr
    rows = {(r["benchmark"], r["figure"]): r for r in json.loads(out.read_text())["rows"]}
    assert rows["pair_a", "met the other"]["value"] == 1 and rows["pair_b", "met the other"]["value"] == 1
    assert rows["timed", "others started"]["value"] == 0
    assert "run 2 at a time" in rows["pair_a", "count"]["note"] and "at a time" not in rows["timed", "latency"]["note"]
    assert [r["benchmark"] for r in json.loads(out.read_text())["rows"]][:2] == ["pair_a", "pair_a"]  # declared order


def test_runs_alone() -> None:
    """A goal on a time (us, ms, s) makes a benchmark run alone; a time without a goal, or a count, does not."""
    def bench(*figures: Figure, alone: bool = False) -> Benchmark:
        return Benchmark(name="b", about="", figures=figures, alone=alone)

    assert bench(Figure("t", "ms", goal=5.0)).runs_alone and bench(Figure("t", "s", goal=1.0)).runs_alone
    assert not bench(Figure("t", "ms"), Figure("n", "requests", goal=1.0)).runs_alone
    assert not bench(Figure("simulated", "min", goal=1.0)).runs_alone
    assert bench(Figure("n", "requests", goal=1.0), alone=True).runs_alone


@pytest.mark.parametrize("jobs", ["0", "-1", "two"])
def test_jobs_must_be_a_positive_whole_number(fakes: Path, jobs: str) -> None:
    done = run_cli(fakes, "run", "fast", "--jobs", jobs, "--out", "/nonexistent/results.json")
    assert done.returncode == 2 and "--jobs" in done.stderr


def test_the_quick_selection_runs_at_the_quick_size(fakes: Path, tmp_path: Path) -> None:
    """`--tag quick` measures a benchmark at its declared quick size; by name it keeps its default, and --size or
    --small still win; a quick size on a benchmark not tagged quick is refused."""
    out = tmp_path / "results.json"

    def seen(*args: str) -> float:
        assert run_cli(fakes, "run", *args, "--out", str(out)).returncode in (0, 1)
        return {(r["benchmark"], r["figure"]): r for r in json.loads(out.read_text())["rows"]}["fast", "size seen"]["value"]

    assert seen("--tag", "quick") == 3
    assert seen("fast") == -1
    assert seen("--tag", "quick", "--size", "9") == 9 and seen("--tag", "quick", "--small") == 2
    with pytest.raises(ValueError, match="quick size"):
        Benchmark(name="b", about="", figures=(Figure("x", "s"),), tags=("slow",), quick=2)
