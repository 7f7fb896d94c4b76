"""Figures: the tokenizer behaviour diff of a 128k-vocabulary tokenizer over the bundled corpus, and what it finds
on the bundled replay histories.

1. A 128,256-id byte-level BPE tokenizer.json in Llama 3's layout (built deterministically by
   bench_tokenizer_diff.build_pair: no Llama 3 tokenizer.json is available offline), its new revision dropping
   2,000 merges, the merges of common English letter pairs (so prose in the corpus gets other ids: a real
   diff) and renaming three reserved special tokens as Llama 3.1 did. The old revision's behaviour is cached (as after the previous
   revision); the figure is one revision's run: wall time (goal < 2 s) and the worker's peak RSS (goal < 500 MB).
2. A revision whose tokenizer blobs did not change: tokenizer runs done (goal 0).
3. Every bundled replay history polled in full: behaviour changes found, and revisions flagged whose tokenizer
   files did not change (goal 0).
Run: python -m benchmarks run tokenizer_behaviour   (size: runs of the 128k revision, default 3)
"""

from __future__ import annotations

import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_tokenizer_diff import RENAMES, build_pair, snapshot
from benchmarks.declare import Benchmark, Figure, detail, run_alone
from tracker.differs.tokenizer_behaviour import BehaviourCache, behaviour_of, diff_behaviour

GOAL_S = 2.0
GOAL_MB = 500.0
BENCHMARK = Benchmark(
    name="tokenizer_behaviour",
    about="The tokenizer behaviour diff of a 128k-vocabulary tokenizer over the bundled corpus; what it finds on the replay",
    tags=("slow", "differs"),
    size="runs of one revision's diff (default 3; the median is kept)",
    small=1,
    timeout_s=1200,
    figures=(
        Figure("one revision's behaviour run, median", "s", goal=GOAL_S, margin=0.5),
        Figure("tokenizer worker peak RSS", "MB", goal=GOAL_MB, margin=0.1),
        Figure("unchanged tokenizer blobs: tokenizer runs", "runs", goal=0),
        Figure("bundled histories: behaviour changes found", "changes"),
        Figure("bundled histories: changes on revisions whose tokenizer files did not change", "changes", goal=0),
    ),
)
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "tokenizer_config.json", "special_tokens_map.json")


def revision_run(old, new, runs: int) -> tuple[float, list]:
    times, changes = [], []
    for _ in range(runs):
        cache = BehaviourCache()
        diff_behaviour(old, old, cache)  # nothing: same blobs
        behaviour_of(old, cache=cache)  # the previous revision's behaviour, cached as in a poll
        started = time.perf_counter()
        changes = diff_behaviour(old, new, cache)
        times.append(time.perf_counter() - started)
        assert cache.runs == 2, cache.runs
    return statistics.median(times), changes


def _cli(config: Path, *args: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "tracker", "--config", str(config), *args], capture_output=True, text=True,
                          check=True, timeout=600)
    return proc.stdout


def replay_figures() -> tuple[int, int, int, int, int]:
    """(revisions, behaviour changes, revisions whose tokenizer files changed, behaviour changes on revisions whose
    tokenizer files did not change, revisions checked and unchanged) over every bundled history, polled in full
    through the CLI."""
    from tracker.standins.replay.control import BUNDLED_ROOT, ReplayServer

    revisions = found = touched = wrong = checked = 0
    with tempfile.TemporaryDirectory() as tmp, ReplayServer(roots=[BUNDLED_ROOT]) as server:
        config = Path(tmp) / "hubwatch.toml"
        config.write_text(f'[hub]\nendpoint = "{server.endpoint}"\n[storage]\nurl = "sqlite:///{tmp}/db.sqlite"\n'
                          f'[osv]\napi_url = "http://127.0.0.1:9"\n', encoding="utf-8")
        for repo in server.repo_ids():
            _cli(config, "watch", "add", repo, "--backfill", "1000")
        subprocess.run([sys.executable, "-m", "tracker", "--config", str(config), "poll"], capture_output=True, check=False)
        for repo in server.repo_ids():
            history = json.loads(_cli(config, "history", repo, "--json"))
            oids = {r["sha"]: _tokenizer_oids(json.loads(_cli(config, "show", repo, r["sha"], "--json"))) for r in history}
            for r in history:
                revisions += 1
                changed = r["parent_sha"] is not None and oids.get(r["parent_sha"]) != oids[r["sha"]]
                touched += changed
                value = r["tokenizer_behaviour"]
                if value is not None and value.get("changed") is False:
                    checked += 1  # "checked, unchanged": blobs changed, every sample's ids did not
                elif value is not None:
                    found += 1
                    wrong += not changed
    return revisions, found, touched, wrong, checked


COMMON = set("etaoinshr")


def _common_pair(merge: str) -> bool:
    left, _, right = merge.partition(" ")
    return left in COMMON and right in COMMON


def _tokenizer_oids(shown: dict) -> dict[str, str]:
    return {f["path"]: f["oid"] for f in shown["files"] if f["path"] in TOKENIZER_FILES}


def measure(size: int | None = None) -> dict[str, float]:
    runs = size or 3
    doc = json.loads(build_pair()[0])
    vocab = doc["model"]["vocab"]  # keep the merges tokenizers accepts (their result is a vocab token)
    doc["model"]["merges"] = [m for m in doc["model"]["merges"] if m.replace(" ", "", 1) in vocab and " " in m]
    old_bytes = json.dumps(doc, ensure_ascii=False).encode()
    for token in doc["added_tokens"]:  # Llama 3.1's renames of three reserved special tokens
        token["content"] = RENAMES.get(token["id"], token["content"])
    del doc["model"]["merges"][5_000:7_000]  # 2,000 merges dropped: tokens they built now split differently
    # ... and the merges of common English letter pairs ("t h", "e r", ...): prose in the corpus now tokenizes
    # differently, so the figure is a real diff (the random merges above rarely match the corpus's text)
    doc["model"]["merges"] = [m for m in doc["model"]["merges"] if not _common_pair(m)]
    new_bytes = json.dumps(doc, ensure_ascii=False).encode()
    old, new = snapshot(old_bytes, "a" * 40), snapshot(new_bytes, "b" * 40)
    seconds, changes = revision_run(old, new, runs)
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    detail(f"tokenizer.json: {len(new_bytes) / 1e6:.1f} MB, 128,256 ids; corpus 1,000 samples; "
           f"change: {changes[0].summary if changes else '(none)'}")
    cache = BehaviourCache()
    unchanged = snapshot(old_bytes, "a" * 40)  # the same tokenizer blob (oid), another commit
    unchanged.sha = "c" * 40
    assert diff_behaviour(old, unchanged, cache) == []
    revisions, found, touched, wrong, checked = replay_figures()
    detail(f"bundled replay histories: {revisions} revisions, {touched} with tokenizer files changed, {checked} checked and unchanged")
    return {"one revision's behaviour run, median": seconds, "tokenizer worker peak RSS": peak_mb,
            "unchanged tokenizer blobs: tokenizer runs": cache.runs, "bundled histories: behaviour changes found": found,
            "bundled histories: changes on revisions whose tokenizer files did not change": wrong}


if __name__ == "__main__":
    run_alone(BENCHMARK, measure)
