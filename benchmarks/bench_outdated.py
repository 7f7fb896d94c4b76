"""Figure: `hubwatch outdated` on a local HF cache of 50 models of which 5 moved upstream (one commit
each, a config and a chat template edit), against the replay server: wall time and Hub requests, for
the first run and for a second run answered from the stored history.

Goal: one request per unchanged model, and a second run that fetches nothing already stored (one head
check per model). Run: python -m benchmarks run outdated
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.declare import Benchmark, Figure, detail, run_alone
from tests.support.synthetic_repos import CONFIG, write_repo
from tracker.standins.osv import OsvFake
from tracker.standins.replay.control import ReplayServer

N, MOVED = 50, 5
BENCHMARK = Benchmark(
    name="outdated",
    about="`hubwatch outdated` on a local HF cache of 50 models, 5 moved upstream: Hub requests and wall time, twice",
    tags=("quick", "pins"),
    figures=(
        Figure("second run: Hub requests per model", "requests", goal=1.0, note="a head check, nothing stored fetched again"),
        Figure("first run: Hub requests per unchanged model", "requests", goal=1.0, note="counted at the server by repo"),
        Figure("first run: Hub requests per moved model", "requests", note="head, commits, files, pin + head snapshots"),
        Figure("first run: wall", "ms", note="CLI start-up included"),
        Figure("second run: wall", "ms"),
    ),
)
TOKENIZER = {"chat_template": "{% for m in messages %}{{ m['content'] }}{% endfor %}", "eos_token": "</s>"}


def _histories(root: Path) -> None:
    for i in range(N):
        first = {"files": {"config.json": CONFIG, "tokenizer_config.json": TOKENIZER, "README.md": "# model\n"}}
        commits = [first]
        if i < MOVED:
            moved_tokenizer = {**TOKENIZER, "chat_template": TOKENIZER["chat_template"] + "{{ eos_token }}"}
            commits.append({"files": {"config.json": {**CONFIG, "rope_theta": 1e6}, "tokenizer_config.json": moved_tokenizer}})
        write_repo(root, f"bench/model-{i:03d}", commits)


def _cache(cache: Path, repo_id: str, sha: str) -> None:
    folder = cache / f"models--{repo_id.replace('/', '--')}"
    (folder / "snapshots" / sha).mkdir(parents=True)
    (folder / "refs").mkdir()
    (folder / "refs" / "main").write_text(sha, encoding="utf-8")


def _run(config: Path, cache: Path, server: ReplayServer) -> tuple[float, list[str], list[dict]]:
    server.reset_requests()
    env = {**os.environ, "HF_HUB_CACHE": str(cache), "HUBWATCH_LOG_LEVEL": "warning"}
    started = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "tracker", "--config", str(config), "outdated", "--json"],
                            capture_output=True, text=True, env=env, cwd=ROOT, check=False)
    elapsed = time.perf_counter() - started
    if result.returncode not in (0, 1):
        raise SystemExit(result.stderr[-3000:])
    return elapsed, [r.path for r in server.requests], json.loads(result.stdout)["models"]


def measure(size: int | None = None) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        root, cache = Path(tmp) / "histories", Path(tmp) / "cache"
        _histories(root)
        with ReplayServer(roots=[root]) as server, OsvFake() as osv:
            for repo_id in server.repo_ids():
                _cache(cache, repo_id, server.commits(repo_id)[0].sha)
            config = Path(tmp) / "hubwatch.toml"
            config.write_text(f'[hub]\nendpoint = "{server.endpoint}"\n[storage]\nurl = "sqlite:///{tmp}/h.db"\n'
                              f'[osv]\napi_url = "{osv.endpoint}"\n', encoding="utf-8")
            first_s, first_paths, models = _run(config, cache, server)
            second_s, second_paths, again = _run(config, cache, server)
    behind = [m for m in models if m["status"] == "behind"]
    assert len(behind) == MOVED and all(m["summary"].get("chat_template") for m in behind), models
    assert again == models
    moved_ids = {f"bench/model-{i:03d}" for i in range(MOVED)}

    def naming_moved(path: str) -> bool:
        return any(f"/{repo_id}/" in path or path.endswith(f"/{repo_id}") for repo_id in moved_ids)

    first_requests, second_requests = len(first_paths), len(second_paths)
    moved_requests = sum(naming_moved(p) for p in first_paths)
    unchanged = N - MOVED
    detail(f"{N} models, {MOVED} moved: first run {first_requests} requests, second {second_requests}")
    return {"second run: Hub requests per model": second_requests / N,
            "first run: Hub requests per unchanged model": (first_requests - moved_requests) / unchanged,
            "first run: Hub requests per moved model": moved_requests / MOVED, "first run: wall": first_s * 1000,
            "second run: wall": second_s * 1000}


if __name__ == "__main__":
    run_alone(BENCHMARK, measure)
