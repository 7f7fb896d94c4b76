"""Lineage of behaviour: the parts of a repo that decide how a model talks (chat template, special tokens,
the stop set, the vocabulary, generation defaults), read from a Snapshot, and which revision of a base each
part of a derivative matches. No I/O: tracker/derivatives.py fetches, this module compares.

A part's value is a digest of its canonical form (`PartValue.digest`) and a looser one (`loose`: templates
with their whitespace collapsed, so a re-save that only re-indents still matches). A GGUF file's header
gives the template, the special tokens and the vocabulary; transformers files give all five parts.
Special tokens are compared by text (bos and eos), which a GGUF and a tokenizer_config.json both name.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

from storage.kinds import BEHAVIOUR_PARTS
from tracker.differs.chat_sources import effective_templates, special_tokens
from tracker.differs.stop_tokens import GENERATION_CONFIG, stop_set
from tracker.snapshot import Snapshot

PARTS = tuple(BEHAVIOUR_PARTS)
PART_WORDS = BEHAVIOUR_PARTS
# The files a part is read from (transformers layout); a GGUF's header is the other source.
PART_FILES = frozenset({"tokenizer_config.json", "chat_template.jinja", "chat_template.json", "special_tokens_map.json",
                        "generation_config.json", "config.json", "tokenizer.json", "processor_config.json"})
TEMPLATE_DIR = "additional_chat_templates/"
COMPARED_SPECIALS = ("bos_token", "eos_token")
GENERATION_NOISE = ("transformers_version", "_from_model_config")
STATUSES = ("carries", "behind", "diverged", "absent")


@dataclass(frozen=True)
class PartValue:
    """One part of one revision: its digest, its loose digest, and a few words a person can read."""

    digest: str
    loose: str
    summary: str

    def to_dict(self) -> dict[str, str]:
        return {"digest": self.digest, "loose": self.loose, "summary": self.summary}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PartValue:
        return cls(str(data["digest"]), str(data["loose"]), str(data.get("summary", "")))


@dataclass(frozen=True)
class PartLineage:
    """Where one part of a derivative stands against the base's history.

    `matched_sha`: the newest base revision whose part it matches (None: diverged or absent); `exact`: matched
    byte for byte (False: after whitespace normalisation); `behind`: how many changes of the part the base
    made after that revision; `missing`: the base revisions that made them, oldest first."""

    status: str
    matched_sha: str | None = None
    exact: bool = True
    behind: int = 0
    missing: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "matched_sha": self.matched_sha, "exact": self.exact, "behind": self.behind,
                "missing": list(self.missing)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PartLineage:
        return cls(str(data["status"]), data.get("matched_sha"), bool(data.get("exact", True)), int(data.get("behind", 0)),
                   tuple(data.get("missing", ())))


def card_bases(readme: str) -> list[str]:
    """The repo ids a model card's front matter names as `base_model` (a string or a list; anything else: none)."""
    import yaml  # a dependency of huggingface_hub, which parses model cards with it too

    match = re.match(r"\A\s*---\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)", readme, re.DOTALL)
    try:
        data = yaml.safe_load(match.group(1)) if match else None
    except yaml.YAMLError:
        return []
    value = data.get("base_model") if isinstance(data, dict) else None
    names = [value] if isinstance(value, str) else value if isinstance(value, list) else []
    return [n for n in names if isinstance(n, str)]


def part_paths(paths: list[str]) -> list[str]:
    """Which of a tree's files the parts are read from."""
    return sorted(p for p in paths if p in PART_FILES or (p.startswith(TEMPLATE_DIR) and p.endswith(".jinja")))


def gguf_paths(paths: list[str]) -> list[str]:
    """A repo's GGUF files, the one to read first: every quantization of a repo carries the same header
    keys, so one is read (the first part of a split file, else the first by name)."""
    files = sorted(p for p in paths if p.endswith(".gguf"))
    firsts = [p for p in files if "-of-" not in p or "-00001-of-" in p]
    return firsts or files


def parts_of(snapshot: Snapshot) -> dict[str, PartValue]:
    """The parts a snapshot holds (a part it does not hold is left out): from its transformers files first,
    else from the header of a GGUF file it scanned."""
    out: dict[str, PartValue] = {}
    gguf = next((s.result for p, s in sorted(snapshot.scans.items()) if s.format == "gguf" and s.result), None)
    template = effective_templates(snapshot).get("default") if snapshot.contents else None
    text = template.text if template is not None else None
    if text is None and gguf is not None:
        text = (gguf.get("chat_templates") or {}).get("default")
    if isinstance(text, str):
        out["chat_template"] = _value(text, " ".join(text.split()), f"{len(text):,} characters")
    specials = {k: v for k, v in special_tokens(snapshot).items() if k in COMPARED_SPECIALS}
    if not specials and gguf is not None:
        found = gguf.get("special_tokens") or {}
        specials = {f"{k}_token": v.get("token") for k, v in found.items()
                    if f"{k}_token" in COMPARED_SPECIALS and isinstance(v, dict) and v.get("token")}
    if specials:
        out["special_tokens"] = _value(specials, None, ", ".join(f"{k.split('_')[0]} {v}" for k, v in sorted(specials.items())))
    if any(p in snapshot.contents for p in (GENERATION_CONFIG, "config.json", "tokenizer_config.json")):
        stops = [t.id if t.id is not None else t.text for t in stop_set(snapshot)]
        if stops:
            out["stop_tokens"] = _value(sorted(stops, key=str), None, ", ".join(str(s) for s in stops))
    vocab = _vocabulary(snapshot)
    if vocab is None and gguf is not None:
        digest = (gguf.get("tokenizer") or {}).get("vocab_sha256")
        vocab = (digest, (gguf.get("tokenizer") or {}).get("tokens")) if digest else None
    if vocab is not None:
        out["vocabulary"] = PartValue(vocab[0], vocab[0], f"{vocab[1]:,} tokens" if vocab[1] else "")
    generation, problem = snapshot.read_json(GENERATION_CONFIG) if GENERATION_CONFIG in snapshot.files else (None, None)
    if isinstance(generation, dict):
        kept = {k: v for k, v in generation.items() if k not in GENERATION_NOISE}
        out["generation"] = _value(kept, None, ", ".join(f"{k}={v}" for k, v in sorted(kept.items()))[:200])
    return out


def _value(value: Any, loose: str | None, summary: str) -> PartValue:
    canonical = value if isinstance(value, str) else json.dumps(value, sort_keys=True, separators=(",", ":"))
    digest = _sha(canonical)
    return PartValue(digest, _sha(loose) if loose is not None else digest, summary)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _vocabulary(snapshot: Snapshot) -> tuple[str, int] | None:
    """tokenizer.json's tokens in id order (the model's vocabulary and the added tokens), digested as the GGUF
    reader digests `tokenizer.ggml.tokens`: each token's UTF-8 bytes, length first."""
    doc, _ = snapshot.read_json("tokenizer.json") if "tokenizer.json" in snapshot.files else (None, None)
    if not isinstance(doc, dict):
        return None
    by_id: dict[int, str] = {}
    vocab = (doc.get("model") or {}).get("vocab") if isinstance(doc.get("model"), dict) else None
    if isinstance(vocab, dict):
        by_id.update({i: t for t, i in vocab.items() if isinstance(i, int)})
    elif isinstance(vocab, list):  # Unigram: [piece, score] in id order
        by_id.update({i: item[0] for i, item in enumerate(vocab) if isinstance(item, list) and item})
    for added in doc.get("added_tokens") or []:
        if isinstance(added, dict) and isinstance(added.get("id"), int) and isinstance(added.get("content"), str):
            by_id[added["id"]] = added["content"]
    if not by_id:
        return None
    digest = hashlib.sha256()
    for i in sorted(by_id):
        item = by_id[i].encode("utf-8", "surrogatepass")
        digest.update(len(item).to_bytes(8, "little"))
        digest.update(item)
    return digest.hexdigest(), len(by_id)


def changes_of(history: list[tuple[str, dict[str, PartValue]]]) -> dict[str, list[str]]:
    """Per part, the base revisions (oldest first) that changed it: the first that has it, then each whose
    value differs from the revision before."""
    out: dict[str, list[str]] = {}
    previous: dict[str, str | None] = {}
    for sha, parts in history:
        for part in PARTS:
            value = parts.get(part)
            digest = value.digest if value is not None else None
            if digest != previous.get(part) and digest is not None:
                out.setdefault(part, []).append(sha)
            previous[part] = digest
    return out


def lineage(history: list[tuple[str, dict[str, PartValue]]], mine: dict[str, PartValue]) -> dict[str, PartLineage]:
    """Each part of a derivative against the base's `history` (oldest first) up to its last revision."""
    changes = changes_of(history)
    out: dict[str, PartLineage] = {}
    for part in PARTS:
        value = mine.get(part)
        if value is None or part not in changes:
            out[part] = PartLineage("absent")
            continue
        found = _newest_match(history, part, value)
        if found is None:
            out[part] = PartLineage("diverged")
            continue
        index, exact = found
        later = [sha for sha in changes[part] if _index(history, sha) > index]
        out[part] = PartLineage("behind" if later else "carries", history[index][0], exact, len(later), tuple(later))
    return out


def status_at(history: list[tuple[str, dict[str, PartValue]]], part: str, found: PartLineage, base_sha: str) -> PartLineage:
    """Where a part of a derivative stands against the base revision `base_sha` (one that changed the part):
    carries it (matches that revision's value or a later one), behind it (by how many changes), or diverged."""
    if found.status in ("absent", "diverged") or found.matched_sha is None:
        return found
    target = _index(history, base_sha)
    matched = _index(history, found.matched_sha)
    changed = [sha for sha in changes_of(history).get(part, []) if matched < _index(history, sha) <= target]
    if not changed:
        return PartLineage("carries", found.matched_sha, found.exact)
    return PartLineage("behind", found.matched_sha, found.exact, len(changed), tuple(changed))


def _newest_match(history: list[tuple[str, dict[str, PartValue]]], part: str, value: PartValue) -> tuple[int, bool] | None:
    for exact in (True, False):
        for index in range(len(history) - 1, -1, -1):
            theirs = history[index][1].get(part)
            if theirs is not None and (theirs.digest == value.digest if exact else theirs.loose == value.loose):
                return index, exact
    return None


def _index(history: list[tuple[str, dict[str, PartValue]]], sha: str) -> int:
    return next(i for i, (s, _) in enumerate(history) if s == sha)
