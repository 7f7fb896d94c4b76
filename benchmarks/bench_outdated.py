"""Figure: `hubwatch outdated` on a local HF cache of 50 models of which 5 moved upstream (one commit
each, a config and a chat template edit), against the replay server: wall time and Hub requests, for
the first run and for a second run answered from the stored history.

Goal: one request per unchanged model, and a second run that fetches nothing already stored (one head
check per model). Run: .venv/bin/python benchmarks/bench_outdated.py
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

from tests.support.synthetic_repos import CONFIG, write_repo
from tracker.standins.osv import OsvFake
from tracker.standins.replay.control import ReplayServer

N, MOVED = 50, 5
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


def _run(config: Path, cache: Path, server: ReplayServer) -> tuple[float, int, list[dict]]:
    server.reset_requests()
    env = {**os.environ, "HF_HUB_CACHE": str(cache), "HUBWATCH_LOG_LEVEL": "warning"}
    started = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "tracker", "--config", str(config), "outdated", "--json"],
                            capture_output=True, text=True, env=env, cwd=ROOT, check=False)
    elapsed = time.perf_counter() - started
    if result.returncode not in (0, 1):
        raise SystemExit(result.stderr[-3000:])
    return elapsed, server.count_requests(), json.loads(result.stdout)["models"]


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root, cache = Path(tmp) / "histories", Path(tmp) / "cache"
        _histories(root)
        with ReplayServer(roots=[root]) as server, OsvFake() as osv:
            for repo_id in server.repo_ids():
                _cache(cache, repo_id, server.commits(repo_id)[0].sha)
            config = Path(tmp) / "hubwatch.toml"
            config.write_text(f'[hub]\nendpoint = "{server.endpoint}"\n[storage]\nurl = "sqlite:///{tmp}/h.db"\n'
                              f'[osv]\napi_url = "{osv.endpoint}"\n', encoding="utf-8")
            first_s, first_requests, models = _run(config, cache, server)
            second_s, second_requests, again = _run(config, cache, server)
    behind = [m for m in models if m["status"] == "behind"]
    assert len(behind) == MOVED and all(m["summary"].get("chat_template") for m in behind), models
    assert again == models
    unchanged = N - MOVED
    moved_requests = first_requests - unchanged
    print(f"models in the cache:                 {N} ({MOVED} moved upstream by one commit)")
    print(f"first run:  wall time                {first_s * 1000:.0f} ms (CLI start-up included)")
    print(f"first run:  Hub requests             {first_requests}  = {unchanged} unchanged x 1 head check"
          f" + {moved_requests} for the {MOVED} moved ({moved_requests / MOVED:.1f} each: head, commits, files, pin + head snapshots)")
    print(f"second run: wall time                {second_s * 1000:.0f} ms")
    print(f"second run: Hub requests             {second_requests}  ({second_requests / N:.2f} per model; goal 1.00:"
          f" a head check, nothing stored fetched again)")


if __name__ == "__main__":
    main()
