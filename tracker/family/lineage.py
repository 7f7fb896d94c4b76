"""Lineage of behaviour: the parts of a repo that decide how a model talks (chat template, special tokens,
the stop set, the vocabulary, generation defaults), read from a Snapshot, and which revision of a base each
part of a derivative matches. No I/O: tracker/family/derivatives.py fetches, this module compares.

A part's value is a digest of its canonical form (`PartValue.digest`) and a looser one (`loose`: templates
with their whitespace collapsed, so a re-save that only re-indents still matches). A GGUF file's header
gives the template, the special tokens, the stop set and the vocabulary; transformers files give all five
parts. A GGUF has no generation defaults: that part is `not_in_format` there, never missing or diverged.

Across formats the forms are made the same where the data allows:
- special tokens by text (bos, eos, eot, eom, pad, unk), compared on the names both sides give (`items`);
- the stop set by text (ids mapped through the vocabulary; a GGUF's is eos + eot + eom + any eog list);
- the vocabulary as llama.cpp's converter writes `tokenizer.ggml.tokens`: tokenizer.json's tokens in id order,
  the gaps up to config.json's `vocab_size` filled with `[PAD<id>]`, WordPiece pieces written as the
  converter's BERT vocabulary writes them (`##x` -> `x`, others after a `▁`, `[..]` tokens kept).
`PARTS_VERSION` is stored with each part: parts stored by an older version are computed again.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field, replace
from typing import Any

from storage.kinds import BEHAVIOUR_PARTS
from tracker.differs.chat_sources import TOKENIZER_CONFIG, effective_templates, special_tokens
from tracker.differs.stop_tokens import GENERATION_CONFIG, TokenNames, stop_set
from tracker.revision.snapshot import Snapshot

PARTS = tuple(BEHAVIOUR_PARTS)
PART_WORDS = BEHAVIOUR_PARTS
# The files a part is read from (transformers layout); a GGUF's header is the other source.
PART_FILES = frozenset({"tokenizer_config.json", "chat_template.jinja", "chat_template.json", "special_tokens_map.json",
                        "generation_config.json", "config.json", "tokenizer.json", "processor_config.json"})
TEMPLATE_DIR = "additional_chat_templates/"
COMPARED_SPECIALS = ("bos_token", "eos_token", "eot_token", "eom_token", "pad_token", "unk_token")
# `tokenizer.ggml.<name>_token_id` -> the transformers name of the same token
GGUF_SPECIALS = {"bos": "bos_token", "eos": "eos_token", "eot": "eot_token", "eom": "eom_token", "padding": "pad_token",
                 "unknown": "unk_token"}
GGUF_STOPS = ("eos", "eot", "eom")  # the ids a GGUF runtime stops on, with any `tokenizer.ggml.eog_token_ids` list
EOG_KEY = "tokenizer.ggml.eog_token_ids"
# 2: special tokens by text beyond bos/eos, the stop set by text, the vocabulary as llama.cpp writes it.
PARTS_VERSION = 2
NOT_IN_FORMAT = "not_in_format"
GGUF_LACKS = ("generation",)  # the parts a GGUF header has no place for
GENERATION_NOISE = ("transformers_version", "_from_model_config")
STATUSES = ("carries", "behind", "diverged", "absent", NOT_IN_FORMAT)


@dataclass(frozen=True)
class PartValue:
    """One part of one revision: its digest, its loose digest, and a few words a person can read. `items`
    (special tokens): name -> text, compared on the names both sides give; `version`: the PARTS_VERSION
    that computed it."""

    digest: str
    loose: str
    summary: str
    items: dict[str, str] | None = field(default=None, compare=False)
    version: int = PARTS_VERSION

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"digest": self.digest, "loose": self.loose, "summary": self.summary, "version": self.version}
        if self.items is not None:
            out["items"] = dict(self.items)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PartValue:
        items = data.get("items")
        items = {str(k): str(v) for k, v in items.items()} if isinstance(items, dict) else None
        version = data.get("version", 1)
        return cls(str(data["digest"]), str(data["loose"]), str(data.get("summary", "")), items,
                   version if isinstance(version, int) else 1)


def parts_stale(parts: dict[str, Any]) -> bool:
    """Whether stored parts (as `to_dict` wrote them) were computed by an older PARTS_VERSION."""
    return any(not isinstance(v, dict) or v.get("version", 1) != PARTS_VERSION for v in parts.values())


def lacking_parts(paths: Any) -> tuple[str, ...]:
    """The parts a copy's files cannot hold: a GGUF without a generation_config.json beside it has no
    generation defaults (shown as `not_in_format`, never as missing)."""
    names = [str(p) for p in paths]
    if any(n.endswith(".gguf") for n in names) and not any(n.rsplit("/", 1)[-1] == GENERATION_CONFIG for n in names):
        return GGUF_LACKS
    return ()


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
    compared: tuple[str, ...] = ()  # special tokens: the names both sides give, the ones compared

    def to_dict(self) -> dict[str, Any]:
        out = {"status": self.status, "matched_sha": self.matched_sha, "exact": self.exact, "behind": self.behind,
               "missing": list(self.missing)}
        if self.compared:
            out["compared"] = list(self.compared)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PartLineage:
        return cls(str(data["status"]), data.get("matched_sha"), bool(data.get("exact", True)), int(data.get("behind", 0)),
                   tuple(data.get("missing", ())), tuple(data.get("compared", ())))


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
    specials = _specials(snapshot) or (_gguf_specials(gguf) if gguf is not None else {})
    if specials:
        out["special_tokens"] = replace(_value(specials, None, _special_words(specials)), items=specials)
    stops = _stop_texts(snapshot)
    if stops is None and gguf is not None:
        stops = _gguf_stops(gguf)
    if stops:
        out["stop_tokens"] = _value(sorted(set(stops)), None, ", ".join(sorted(set(stops))))
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


def _special_words(specials: dict[str, str]) -> str:
    return ", ".join(f"{k.removesuffix('_token')} {v}" for k, v in sorted(specials.items()))


def _specials(snapshot: Snapshot) -> dict[str, str]:
    """The compared special tokens a transformers snapshot names, by text (eot/eom only where
    tokenizer_config.json names them, which few do)."""
    found = {k: v for k, v in special_tokens(snapshot).items() if k in COMPARED_SPECIALS}
    config = snapshot.read_json(TOKENIZER_CONFIG)[0] if TOKENIZER_CONFIG in snapshot.files else None
    for key in ("eot_token", "eom_token"):
        value = config.get(key) if isinstance(config, dict) else None
        value = value.get("content") if isinstance(value, dict) else value
        if isinstance(value, str):
            found[key] = value
    return found


def _gguf_specials(gguf: dict[str, Any]) -> dict[str, str]:
    """The compared special tokens a GGUF header names (`tokenizer.ggml.*_token_id` mapped through its tokens)."""
    found = gguf.get("special_tokens") or {}
    return {GGUF_SPECIALS[k]: v["token"] for k, v in found.items()
            if k in GGUF_SPECIALS and isinstance(v, dict) and isinstance(v.get("token"), str) and v["token"]}


def _stop_texts(snapshot: Snapshot) -> list[str] | None:
    """The transformers stop set by text (an id whose text is not known: `#<id>`); None without its files."""
    if not any(p in snapshot.contents for p in (GENERATION_CONFIG, "config.json", TOKENIZER_CONFIG)):
        return None
    names = TokenNames(snapshot)
    return [t.text if t.text is not None else f"#{t.id}" for t in stop_set(snapshot, names)]


def _gguf_stops(gguf: dict[str, Any]) -> list[str]:
    """A GGUF's stop set by text: its eos, eot and eom tokens and any eog id list the header carries."""
    found = gguf.get("special_tokens") or {}
    texts = [v.get("token") for k, v in found.items() if k in GGUF_STOPS and isinstance(v, dict)]
    eog = (gguf.get("metadata") or {}).get(EOG_KEY)
    if isinstance(eog, list):
        texts += [f"#{i}" for i in eog if isinstance(i, int)]  # the reader keeps no tokens by id beyond the specials
    return [t for t in texts if isinstance(t, str) and t]


def _value(value: Any, loose: str | None, summary: str) -> PartValue:
    canonical = value if isinstance(value, str) else json.dumps(value, sort_keys=True, separators=(",", ":"))
    digest = _sha(canonical)
    return PartValue(digest, _sha(loose) if loose is not None else digest, summary)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _vocabulary(snapshot: Snapshot) -> tuple[str, int] | None:
    """tokenizer.json's tokens as llama.cpp's converter writes `tokenizer.ggml.tokens`, digested as the GGUF
    reader digests them (each token's UTF-8 bytes, length first): in id order (the model's vocabulary, then
    the added tokens over it), each id up to config.json's `vocab_size` that names no token as `[PAD<id>]`,
    and a WordPiece vocabulary with the converter's phantom spaces."""
    doc, _ = snapshot.read_json("tokenizer.json") if "tokenizer.json" in snapshot.files else (None, None)
    if not isinstance(doc, dict):
        return None
    model = doc.get("model") if isinstance(doc.get("model"), dict) else {}
    by_id: dict[int, str] = {}
    vocab = model.get("vocab")
    if isinstance(vocab, dict):
        by_id.update({i: t for t, i in vocab.items() if isinstance(i, int) and i >= 0})
    elif isinstance(vocab, list):  # Unigram: [piece, score] in id order
        by_id.update({i: item[0] for i, item in enumerate(vocab) if isinstance(item, list) and item and isinstance(item[0], str)})
    for added in doc.get("added_tokens") or []:
        if isinstance(added, dict) and isinstance(added.get("id"), int) and added["id"] >= 0 and isinstance(added.get("content"), str):
            by_id[added["id"]] = added["content"]
    if not by_id:
        return None
    size = max(by_id) + 1
    config = snapshot.read_json("config.json")[0] if "config.json" in snapshot.files else None
    declared = config.get("vocab_size") if isinstance(config, dict) else None
    if isinstance(declared, int) and not isinstance(declared, bool) and size < declared <= size + 2**20:
        size = declared
    wordpiece = model.get("type") == "WordPiece"
    digest = hashlib.sha256()
    for i in range(size):
        token = by_id.get(i, f"[PAD{i}]")
        item = (_phantom(token) if wordpiece else token).encode("utf-8", "surrogatepass")
        digest.update(len(item).to_bytes(8, "little"))
        digest.update(item)
    return digest.hexdigest(), size


def _phantom(token: str) -> str:
    """A WordPiece token as llama.cpp's BERT converter writes it: `[..]` kept, `##x` as `x`, others after `▁`."""
    if token.startswith("[") and token.endswith("]"):
        return token
    return token[2:] if token.startswith("##") else "\u2581" + token


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


def lineage(history: list[tuple[str, dict[str, PartValue]]], mine: dict[str, PartValue],
            lacking: tuple[str, ...] = ()) -> dict[str, PartLineage]:
    """Each part of a derivative against the base's `history` (oldest first) up to its last revision;
    `lacking`: the parts the copy's format has no place for (`not_in_format` when it does not hold them)."""
    changes = changes_of(history)
    out: dict[str, PartLineage] = {}
    for part in PARTS:
        value = mine.get(part)
        if value is None and part in lacking:
            out[part] = PartLineage(NOT_IN_FORMAT)
            continue
        if value is None or part not in changes:
            out[part] = PartLineage("absent")
            continue
        found = _newest_match(history, part, value)
        if found is None:
            out[part] = PartLineage("diverged", compared=_common(history[-1][1].get(part), value))
            continue
        index, exact, compared = found
        later = [sha for sha in changes[part] if _index(history, sha) > index]
        out[part] = PartLineage("behind" if later else "carries", history[index][0], exact, len(later), tuple(later), compared)
    return out


def status_at(history: list[tuple[str, dict[str, PartValue]]], part: str, found: PartLineage, base_sha: str) -> PartLineage:
    """Where a part of a derivative stands against the base revision `base_sha` (one that changed the part):
    carries it (matches that revision's value or a later one), behind it (by how many changes), or diverged."""
    if found.status in ("absent", "diverged", NOT_IN_FORMAT) or found.matched_sha is None:
        return found
    target = _index(history, base_sha)
    matched = _index(history, found.matched_sha)
    changed = [sha for sha in changes_of(history).get(part, []) if matched < _index(history, sha) <= target]
    if not changed:
        return PartLineage("carries", found.matched_sha, found.exact, compared=found.compared)
    return PartLineage("behind", found.matched_sha, found.exact, len(changed), tuple(changed), found.compared)


def _newest_match(history: list[tuple[str, dict[str, PartValue]]], part: str,
                  value: PartValue) -> tuple[int, bool, tuple[str, ...]] | None:
    """The newest base revision the value matches: byte for byte, else loosely, else (special tokens) on
    the names both sides give; with whether it was exact and the names compared."""
    for exact in (True, False):
        for index in range(len(history) - 1, -1, -1):
            theirs = history[index][1].get(part)
            if theirs is not None and (theirs.digest == value.digest if exact else theirs.loose == value.loose):
                return index, exact, ()
    if value.items is None:
        return None
    for index in range(len(history) - 1, -1, -1):
        theirs = history[index][1].get(part)
        common = _common(theirs, value)
        if theirs is not None and theirs.items is not None and common and all(theirs.items[k] == value.items[k] for k in common):
            return index, False, common
    return None


def _common(theirs: PartValue | None, mine: PartValue) -> tuple[str, ...]:
    """The special-token names both values give (nothing for other parts)."""
    if theirs is None or theirs.items is None or mine.items is None or theirs.items.keys() == mine.items.keys():
        return ()
    return tuple(sorted(theirs.items.keys() & mine.items.keys()))


def _index(history: list[tuple[str, dict[str, PartValue]]], sha: str) -> int:
    return next(i for i, (s, _) in enumerate(history) if s == sha)
