"""What a tokenizer change does: the bundled corpus tokenized before and after, compared sample by sample.

The tokenizer (tokenizer.json through `tokenizers`, else tokenizer.model through `sentencepiece`; never
transformers) runs in a child process (`tokenize_worker.py`) under an address-space, CPU and wall-clock
limit, so a 50 MB or malformed file costs a note, never the revision. A behaviour is computed once per
tokenizer blob set (the oids of the tokenizer file and of the configs naming its special tokens) and
kept in a small in-process cache (consecutive revisions share their middle one, and a revision whose
tokenizer blobs did not change is not run at all), which `tracker.pipeline.behaviour_store` fills from and writes to
the history, so a restart does not run an unchanged tokenizer again.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tracker.corpus import load_corpus
from tracker.differs.chat_sources import SPECIAL_TOKENS_MAP, TOKENIZER_CONFIG, special_tokens
from tracker.revision.changes import Change, ChangeKind, Severity
from tracker.revision.snapshot import Snapshot

WORKER = Path(__file__).with_name("tokenize_worker.py")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model")  # in order of preference
SPECIAL_NAMES = ("bos", "eos", "pad", "unk")
CHANGED_IDS_LISTED = 200  # sample ids named in the detail; the count is always exact
EXAMPLES = 3
EXAMPLE_TOKENS = 48
BEHAVIOUR_VERSION = "1"  # bump when the worker's output changes: stored behaviours are then computed again
UNCHANGED_NOTE = "checked, unchanged: every corpus sample gets the same ids, special ids and round trips"


@dataclass(frozen=True)
class BehaviourLimits:
    """Limits for one tokenizer run: wall clock, CPU and address space of the worker."""

    time_s: float = 30.0
    cpu_s: int = 60
    memory_bytes: int = 2 * 2**30


DEFAULT_LIMITS = BehaviourLimits()


def behaviour_key(snapshot: Snapshot) -> tuple[str, ...] | None:
    """The blob set a behaviour depends on: the tokenizer file's name and oid, and the special-token configs'."""
    for name in TOKENIZER_FILES:
        if name in snapshot.files:
            extras = [f"{p}={snapshot.files[p].oid}" for p in (TOKENIZER_CONFIG, SPECIAL_TOKENS_MAP) if p in snapshot.files]
            return (f"{name}={snapshot.files[name].content_id}", *extras)
    return None


class BehaviourCache:
    """Behaviours by blob set, the most recent `size` kept; safe to share between threads."""

    def __init__(self, size: int = 16) -> None:
        self.size = size
        self._items: OrderedDict[tuple[str, ...], dict[str, Any]] = OrderedDict()
        self._lock = threading.Lock()
        self.runs = 0  # tokenizer runs done (the benchmark's "work")

    def get(self, key: tuple[str, ...]) -> dict[str, Any] | None:
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key]
            return None

    def put(self, key: tuple[str, ...], behaviour: dict[str, Any]) -> None:
        with self._lock:
            self._items[key] = behaviour
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)


CACHE = BehaviourCache()


def diff(old: Snapshot | None, new: Snapshot) -> list[Change]:
    """One Change when the corpus tokenizes differently (or a side cannot be tokenized: a note)."""
    return diff_behaviour(old, new)


def diff_behaviour(
    old: Snapshot | None, new: Snapshot, cache: BehaviourCache = CACHE, limits: BehaviourLimits = DEFAULT_LIMITS
) -> list[Change]:
    if old is None:
        return []
    old_key, new_key = behaviour_key(old), behaviour_key(new)
    if old_key is None or new_key is None or old_key == new_key:
        return []  # no tokenizer on a side (the file differ says so), or the same blobs: nothing to run
    before = behaviour_of(old, old_key, cache, limits)
    after = behaviour_of(new, new_key, cache, limits)
    path = after.get("file") or before.get("file") or ""
    for side, behaviour in (("new", after), ("old", before)):
        if "error" in behaviour:
            return [_note(path, side, behaviour["error"])]
    detail = compare_behaviour(before, after)
    if detail is None:
        return []
    return [Change(ChangeKind.TOKENIZER, path, behaviour_summary(detail), behaviour_severity(detail),
                   {"tokenizer_behaviour": detail})]


def _note(path: str, side: str, reason: str) -> Change:
    summary = f"tokenizer behaviour not compared: the {side} tokenizer could not be loaded ({reason})"
    detail = {"tokenizer_behaviour": {"compared": False, "side": side, "note": reason}}
    return Change(ChangeKind.TOKENIZER, path, summary[:300], Severity.INFO, detail)


def behaviour_of(
    snapshot: Snapshot, key: tuple[str, ...] | None = None, cache: BehaviourCache = CACHE,
    limits: BehaviourLimits = DEFAULT_LIMITS,
) -> dict[str, Any]:
    """The corpus tokenized by the snapshot's tokenizer, from the cache when its blobs were seen."""
    key = key or behaviour_key(snapshot)
    if key is None:
        return {"error": "no tokenizer.json or tokenizer.model"}
    if (hit := cache.get(key)) is not None:
        return hit
    name = key[0].split("=", 1)[0]
    data = snapshot.contents.get(name)
    if data is None:
        behaviour = {"file": name, "error": snapshot.unavailable.get(name, f"{name} was not downloaded")}
    else:
        cache.runs += 1
        behaviour = {"file": name, **run_tokenizer(name, data, special_tokens(snapshot), limits)}
    cache.put(key, behaviour)
    return behaviour


def run_tokenizer(name: str, data: bytes, special: dict[str, str], limits: BehaviourLimits = DEFAULT_LIMITS) -> dict[str, Any]:
    """The worker's answer for one tokenizer file: the behaviour, or {"error": reason}."""
    with tempfile.TemporaryDirectory(prefix="hubwatch-tok-") as tmp:
        path = Path(tmp) / name
        path.write_bytes(data)
        request = {"file": str(path), "format": name, "special": special, "samples": load_corpus()["samples"],
                   "memory_bytes": limits.memory_bytes, "cpu_s": limits.cpu_s}
        env = {"PATH": os.environ.get("PATH", ""), "RAYON_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
        try:
            proc = subprocess.run([sys.executable, "-I", str(WORKER)], input=json.dumps(request).encode(),
                                  capture_output=True, timeout=limits.time_s, env=env, check=False)
        except subprocess.TimeoutExpired:
            return {"error": f"exceeded the time limit ({limits.time_s:g} s)"}
    try:
        answer = json.loads(proc.stdout.decode("utf-8").strip().splitlines()[-1])
    except (ValueError, IndexError, UnicodeDecodeError):
        tail = proc.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or [f"exit status {proc.returncode}"]
        if proc.returncode < 0:
            tail = [f"killed by signal {-proc.returncode} (memory or CPU limit)"]
        return {"error": f"the tokenizer worker failed: {tail[0][:300]}"}
    return answer if isinstance(answer, dict) else {"error": "the tokenizer worker answered nonsense"}


# --- comparing two behaviours --------------------------------------------------------------------


def _categories() -> dict[str, str]:
    return {s["id"]: s["category"] for s in load_corpus()["samples"]}


def _totals(samples: dict[str, Any]) -> tuple[int, dict[str, int]]:
    by_category: dict[str, int] = {}
    categories = _categories()
    for sample_id, entry in samples.items():
        cat = categories.get(sample_id, "other")
        by_category[cat] = by_category.get(cat, 0) + len(entry["ids"])
    return sum(by_category.values()), dict(sorted(by_category.items()))


def compare_behaviour(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any] | None:
    """What differs between two behaviours on the corpus; None when every sample gets the same ids."""
    old_samples, new_samples = before["samples"], after["samples"]
    changed = [i for i in new_samples if i in old_samples and old_samples[i]["ids"] != new_samples[i]["ids"]]
    special = {n: {"old": before["special"][n], "new": after["special"][n]}
               for n in SPECIAL_NAMES if before["special"].get(n) != after["special"].get(n)}
    old_fail = {i for i, e in old_samples.items() if not e["roundtrip"]}
    new_fail = {i for i, e in new_samples.items() if not e["roundtrip"]}
    added_ids = None if before["added_ids"] == after["added_ids"] else {"old": before["added_ids"], "new": after["added_ids"]}
    if not changed and not special and old_fail == new_fail and added_ids is None:
        return None
    (old_total, old_cat), (new_total, new_cat) = _totals(old_samples), _totals(new_samples)
    categories = _categories()
    return {
        "compared": True,
        "changed": True,
        "corpus": {"version": load_corpus()["version"], "samples": len(new_samples)},
        "backend": {"old": before["backend"], "new": after["backend"], "version": after["version"]},
        "chat_format": {"old": before["chat_format"], "new": after["chat_format"]},
        "ids_changed": {"count": len(changed), "samples": changed[:CHANGED_IDS_LISTED],
                        "by_category": _count_by(changed, categories)},
        "examples": [_example(i, categories[i], old_samples[i], new_samples[i]) for i in changed[:EXAMPLES]],
        "tokens": {"old": old_total, "new": new_total, "by_category": {
            c: {"old": old_cat.get(c, 0), "new": new_cat.get(c, 0)} for c in sorted({*old_cat, *new_cat})}},
        "roundtrip_failures": {"old": len(old_fail), "new": len(new_fail), "appeared": sorted(new_fail - old_fail),
                               "vanished": sorted(old_fail - new_fail)},
        "special_ids": {n: after["special"][n] for n in SPECIAL_NAMES},
        "special_ids_changed": special,
        "added_ids": added_ids,
    }


def unchanged_value(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """`tokenizer_behaviour` of a revision whose tokenizer blobs changed but whose corpus ids did not."""
    total, by_category = _totals(after["samples"])
    return {"compared": True, "changed": False, "note": UNCHANGED_NOTE,
            "corpus": {"version": load_corpus()["version"], "samples": len(after["samples"])},
            "backend": {"old": before.get("backend"), "new": after.get("backend"), "version": after.get("version")},
            "ids_changed": {"count": 0, "samples": [], "by_category": {}},
            "tokens": {"old": total, "new": total, "by_category": {c: {"old": n, "new": n} for c, n in by_category.items()}},
            "special_ids": {n: after["special"][n] for n in SPECIAL_NAMES}}


def _count_by(ids: list[str], categories: dict[str, str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for i in ids:
        out[categories[i]] = out.get(categories[i], 0) + 1
    return dict(sorted(out.items()))


def _example(sample_id: str, category: str, old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    text = new.get("text") or _sample_text(sample_id)
    return {"id": sample_id, "category": category, "text": text[:200],
            "old_ids": old["ids"][:EXAMPLE_TOKENS], "new_ids": new["ids"][:EXAMPLE_TOKENS],
            "old_count": len(old["ids"]), "new_count": len(new["ids"])}


def _sample_text(sample_id: str) -> str:
    return next((s.get("text") or "" for s in load_corpus()["samples"] if s["id"] == sample_id), "")


def _id_changed(change: dict[str, Any]) -> bool:
    old, new = change["old"], change["new"]
    return old.get("id") is not None and new.get("id") is not None and old["id"] != new["id"]


def behaviour_severity(detail: dict[str, Any]) -> Severity:
    """A special token's id changed: critical; any sample's ids changed: warning; round trips or added ids alone: notice."""
    if any(_id_changed(c) for c in detail["special_ids_changed"].values()):
        return Severity.CRITICAL
    if detail["ids_changed"]["count"] or detail["special_ids_changed"] or detail["added_ids"] is not None:
        return Severity.WARNING
    return Severity.NOTICE


def behaviour_summary(detail: dict[str, Any]) -> str:
    """`tokenizer behaviour: 17 of 1,000 corpus samples get different ids; 31,204 -> 32,140 tokens (+3.0%); ...`."""
    changed, total = detail["ids_changed"]["count"], detail["corpus"]["samples"]
    old_t, new_t = detail["tokens"]["old"], detail["tokens"]["new"]
    parts = [f"{changed:,} of {total:,} corpus samples get different ids"]
    if old_t != new_t:
        parts.append(f"{old_t:,} -> {new_t:,} tokens ({(new_t - old_t) / max(old_t, 1):+.1%})")
    for name, c in detail["special_ids_changed"].items():
        parts.append(f"{name} {c['old'].get('token')!s} ({c['old'].get('id')}) -> {c['new'].get('token')!s} ({c['new'].get('id')})")
    rt = detail["roundtrip_failures"]
    if rt["appeared"] or rt["vanished"]:
        parts.append(f"round-trip failures {len(rt['appeared'])} appeared, {len(rt['vanished'])} vanished")
    if detail["added_ids"] is not None:
        old, new = detail["added_ids"]["old"], detail["added_ids"]["new"]
        parts.append(f"ids added around a text {_ids(old)} -> {_ids(new)}")
    return "tokenizer behaviour: " + "; ".join(parts)


def _ids(ids: list[int]) -> str:
    return "[" + ", ".join(map(str, ids[:8])) + (", ..." if len(ids) > 8 else "") + "]"


def digest(behaviour: dict[str, Any]) -> str:
    """A short fingerprint of a behaviour's ids (equal behaviours, equal digests)."""
    ids = {i: e["ids"] for i, e in behaviour.get("samples", {}).items()}
    return hashlib.sha256(json.dumps(ids, sort_keys=True).encode()).hexdigest()[:16]
