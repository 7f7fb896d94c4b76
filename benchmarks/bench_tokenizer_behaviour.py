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
Run: .venv/bin/python benchmarks/bench_tokenizer_behaviour.py [--runs 3]
"""

from __future__ import annotations

import argparse
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
from tracker.differs.tokenizer_behaviour import BehaviourCache, behaviour_of, diff_behaviour

GOAL_S = 2.0
GOAL_MB = 500.0
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
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
    seconds, changes = revision_run(old, new, args.runs)
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"tokenizer.json: {len(new_bytes) / 1e6:.1f} MB, 128,256 ids; corpus 1,000 samples")
    print(f"change: {changes[0].summary if changes else '(none)'}")
    print(f"one revision's behaviour run, wall (median {args.runs}): {seconds:6.2f} s  (goal < {GOAL_S:g} s, ratio {seconds / GOAL_S:.2f})")
    print(f"tokenizer worker peak RSS:                  {peak_mb:6.0f} MB (goal < {GOAL_MB:g} MB, ratio {peak_mb / GOAL_MB:.2f})")
    cache = BehaviourCache()
    unchanged = snapshot(old_bytes, "a" * 40)  # the same tokenizer blob (oid), another commit
    unchanged.sha = "c" * 40
    started = time.perf_counter()
    assert diff_behaviour(old, unchanged, cache) == []
    print(f"unchanged tokenizer blobs: {cache.runs} tokenizer runs, {(time.perf_counter() - started) * 1e3:.2f} ms (goal 0 runs)")
    revisions, found, touched, wrong, checked = replay_figures()
    print(f"bundled replay histories: {revisions} revisions, {touched} with tokenizer files changed, "
          f"{found} behaviour changes found, {checked} checked and unchanged, "
          f"{wrong} on revisions whose tokenizer files did not change (goal 0)")


if __name__ == "__main__":
    main()
