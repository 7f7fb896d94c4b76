"""The structure verifier on a revision: its snapshot read into the estimator's ``LintInputs`` (config, weight
manifest, tokenizer facts, files, weight indexes), the findings, and the `lint` changes between a revision and its
parent (a finding that appears, or one that is resolved)."""

from __future__ import annotations

import posixpath
import threading
from collections import OrderedDict
from typing import Any

from estimator.lints import Finding, LintInputs, TokenizerFacts, lint
from tracker.differs.chat_sources import TOKENIZER_CONFIG, special_tokens
from tracker.differs.stop_tokens import added_token_ids
from tracker.pipeline.estimate_change import manifest_of
from tracker.revision.changes import Change, ChangeKind, Severity
from tracker.revision.classify import WEIGHT_INDEX_NAMES, is_pickle, is_safetensors, kind_of
from tracker.revision.snapshot import Snapshot

TOKENIZER_JSON = "tokenizer.json"
NO_LIMIT_FLOAT = 1e30  # a model_max_length past transformers' "no limit" sentinel is read as the sentinel
# What a revision's findings are read from: a change of any other kind leaves them as they were.
INPUT_KINDS = frozenset({ChangeKind.CONFIG, ChangeKind.TOKENIZER, ChangeKind.WEIGHTS, ChangeKind.STOP_TOKENS})
# The files tokenizer facts are read from: the same blobs give the same facts.
TOKENIZER_INPUTS = (TOKENIZER_JSON, TOKENIZER_CONFIG, "special_tokens_map.json", "vocab.txt", "vocab.json",
                    "added_tokens.json")
FACTS_KEPT = 512  # tokenizers whose facts a process keeps, by their files' blobs (a few hundred bytes each)
_facts: OrderedDict[tuple[Any, ...], TokenizerFacts | None] = OrderedDict()
_facts_lock = threading.Lock()


def tokenizer_facts(snapshot: Snapshot) -> TokenizerFacts | None:
    """`read_tokenizer_facts`, once per snapshot, and once per process for the same tokenizer files (by blob id and
    whether their bytes are held): a revision read back from the database with the tokenizer seen before is not
    parsed again."""
    return snapshot.derived("tokenizer_facts", _kept_facts)


def _kept_facts(snapshot: Snapshot) -> TokenizerFacts | None:
    key = tuple((_oid(snapshot, p), p in snapshot.contents) for p in TOKENIZER_INPUTS)
    with _facts_lock:
        if key in _facts:
            _facts.move_to_end(key)
            return _facts[key]
    facts = read_tokenizer_facts(snapshot)
    with _facts_lock:
        _facts[key] = facts
        while len(_facts) > FACTS_KEPT:
            _facts.popitem(last=False)
    return facts


def share_tokenizer_facts(parent: Snapshot, snapshot: Snapshot) -> None:
    """When the parent's tokenizer files are the revision's (same blobs, same bytes held), the parent's facts are
    the revision's: a large tokenizer.json is parsed once for both, not once each."""
    if all(_oid(parent, p) == _oid(snapshot, p) and (p in parent.contents) == (p in snapshot.contents)
           for p in TOKENIZER_INPUTS):
        parent.derived("tokenizer_facts", lambda _: tokenizer_facts(snapshot))


def _oid(snapshot: Snapshot, path: str) -> str | None:
    entry = snapshot.files.get(path)
    return entry.oid if entry else None


def read_tokenizer_facts(snapshot: Snapshot) -> TokenizerFacts | None:
    """The ids the tokenizer produces (tokenizer.json's vocabulary and added tokens, else vocab.txt or vocab.json
    with added_tokens.json), the special tokens tokenizer_config.json names, with their ids, and model_max_length;
    None when the revision has no tokenizer file the verifier can read. The vocabulary is read where it lies (its
    largest id by one C-level max), never copied: a 200,000-entry vocabulary costs its JSON parse and little more."""
    vocab: dict[Any, Any] = {}
    extra: dict[str, int] = {}  # added tokens, by the ids loading gives them
    source = None
    doc = snapshot.read_json(TOKENIZER_JSON)[0] if TOKENIZER_JSON in snapshot.files else None
    if isinstance(doc, dict):
        source = TOKENIZER_JSON
        model = doc.get("model") if isinstance(doc.get("model"), dict) else {}
        found = model.get("vocab")
        if isinstance(found, list):  # Unigram: [[piece, score], ...], the id is the position
            found = {p[0]: i for i, p in enumerate(found) if isinstance(p, list) and p and isinstance(p[0], str)}
        vocab = found if isinstance(found, dict) else {}
        added = doc.get("added_tokens")
        if isinstance(added, list):
            extra = added_token_ids(added, vocab)
    elif "vocab.txt" in snapshot.contents:
        source = "vocab.txt"
        vocab = {line: i for i, line in enumerate((snapshot.text("vocab.txt") or "").splitlines())}
    elif "vocab.json" in snapshot.files:
        found = snapshot.read_json("vocab.json")[0]
        if isinstance(found, dict):
            source, vocab = "vocab.json", found
            added_file = snapshot.read_json("added_tokens.json")[0] if "added_tokens.json" in snapshot.files else None
            if isinstance(added_file, dict):
                extra = {t: i for t, i in added_file.items() if isinstance(i, int) and not isinstance(i, bool)}
    config = snapshot.read_json(TOKENIZER_CONFIG)[0] if TOKENIZER_CONFIG in snapshot.files else None
    config = config if isinstance(config, dict) else {}
    decoder = config.get("added_tokens_decoder")
    for key, token in decoder.items() if isinstance(decoder, dict) else ():
        if str(key).isdigit() and isinstance(token, dict) and isinstance(token.get("content"), str):
            extra.setdefault(token["content"], int(key))
    if source is None and not config:
        return None
    limit = config.get("model_max_length")
    limit = min(float(limit), NO_LIMIT_FLOAT) if isinstance(limit, float) else (
        float(min(limit, 10**30)) if isinstance(limit, int) and not isinstance(limit, bool) else None)

    def id_of(text: str) -> int | None:
        found = extra.get(text, vocab.get(text))
        return found if isinstance(found, int) and not isinstance(found, bool) else None

    special = {role: (text, i) for role, text in special_tokens(snapshot).items() if (i := id_of(text)) is not None}
    largest = _largest(vocab, extra) if source else None
    return TokenizerFacts(size=largest[1] + 1 if largest else None, largest=largest, special=special,
                          model_max_length=limit, source=source or TOKENIZER_CONFIG)


def _largest(vocab: dict[Any, Any], extra: dict[str, int]) -> tuple[str, int] | None:
    """The token with the largest id: the vocabulary's maximum found in C (its last entry, as files list them, is
    usually that token), or the largest added token's when larger."""
    best: tuple[str, int] | None = None
    if vocab:
        try:
            top = max(vocab.values())
        except TypeError:  # an id that is not a number: only the integer ones count
            top = max((i for i in vocab.values() if isinstance(i, int) and not isinstance(i, bool)), default=None)
        if isinstance(top, int) and not isinstance(top, bool):
            text, last = next(reversed(vocab.items()))
            best = (text, top) if last == top else next((t, i) for t, i in vocab.items() if i == top)
    for text, i in extra.items():
        if best is None or i > best[1]:
            best = (text, i)
    return best


def lint_inputs(snapshot: Snapshot) -> LintInputs:
    """What the verifier reads of a revision (config.json as parsed, or why it cannot be)."""
    config, error = snapshot.read_json("config.json")
    generation = snapshot.read_json("generation_config.json")[0] if "generation_config.json" in snapshot.files else None
    files = tuple(sorted(snapshot.files))
    weights = [p for p in files if is_safetensors(p)] or [p for p in files if is_pickle(p) and kind_of(p) is ChangeKind.WEIGHTS]
    complete = all(p in snapshot.manifests and not snapshot.manifests[p].error for p in weights)
    indexes = {p: snapshot.read_json(p)[0] for p in files if posixpath.basename(p) in WEIGHT_INDEX_NAMES}
    unreadable = error if config is None and error and "not valid JSON" in error else None
    return LintInputs(config=config, manifest=manifest_of(snapshot), tokenizer=tokenizer_facts(snapshot),
                      generation_config=generation, files=files, indexes=indexes, weights_complete=complete,
                      config_error=unreadable)


def verify_snapshot(snapshot: Snapshot) -> list[Finding] | None:
    """The revision's findings (computed once per snapshot); None for a repo without config.json."""
    if "config.json" not in snapshot.files:
        return None
    return snapshot.derived("lints", lambda s: lint(lint_inputs(s)))


def should_verify(is_baseline: bool, changes: list[Change]) -> bool:
    """On a first revision, and whenever the config, tokenizer or weights (files, headers, the index) moved."""
    return is_baseline or any(c.kind in INPUT_KINDS for c in changes)


# The lints that need each input: a revision that lacks the input's bytes cannot say such a finding is gone.
TOKENIZER_LINTS = frozenset({"vocab-size-tokenizer", "special-token-out-of-vocab", "max-position-tokenizer"})
WEIGHT_LINTS = frozenset({"vocab-size-embedding", "vocab-size-tokenizer", "special-token-out-of-vocab",
                          "attention-shape-mismatch", "tie-word-embeddings-head", "bn-at-output", "head-missing",
                          "torch-dtype-weights"})


def undecided(snapshot: Snapshot) -> frozenset[str]:
    """The lints this revision cannot decide: its tokenizer files or weight headers are in the commit but were not
    read (too large, refused, unreadable), so a finding of the parent's on them is not reported as resolved."""
    out: set[str] = set()
    if any(p in snapshot.files and p not in snapshot.contents for p in (TOKENIZER_JSON, TOKENIZER_CONFIG)):
        out |= TOKENIZER_LINTS
    if not lint_inputs(snapshot).weights_complete:
        out |= WEIGHT_LINTS
    return frozenset(out)


def lint_changes(before: list[Finding] | None, after: list[Finding] | None,
                 unsure: frozenset[str] = frozenset()) -> tuple[Change | None, Change | None]:
    """(the findings that appeared, those resolved) between a parent's findings and a revision's, each as one
    `lint` change (None when there are none): appeared at the severity of the worst, resolved as a notice. A finding
    whose lint is in ``unsure`` (`undecided` on the revision) is not counted as resolved."""
    old = {f.key: f for f in before or []}
    new = {f.key: f for f in after or []}
    appeared = [f for k, f in new.items() if k not in old]
    resolved = [f for k, f in old.items() if k not in new and f.id not in unsure]
    current = [f.to_dict() for f in after or []]
    up = None
    if appeared:
        severity = max((Severity(f.severity) for f in appeared), key=lambda s: s.rank)
        up = Change(kind=ChangeKind.LINT, path="config.json", severity=severity,
                    summary="verify: " + _listed(appeared, "+"),
                    detail={"appeared": [f.to_dict() for f in appeared], "findings": current})
    down = None
    if resolved:
        down = Change(kind=ChangeKind.LINT, path="config.json", severity=Severity.NOTICE,
                      summary="verify: resolved " + _listed(resolved, "-"),
                      detail={"resolved": [f.to_dict() for f in resolved], "findings": current})
    return up, down


def _listed(findings: list[Finding], sign: str) -> str:
    shown = [f"{sign}{f.id} ({f.severity}): {f.message}" for f in findings[:2]]
    more = f"; +{len(findings) - 2} more" if len(findings) > 2 else ""
    return "; ".join(shown) + more


def lints_reader(store: Any) -> Any:
    """For the revision page and the API (feeds may not import the tracker): a stored revision -> its findings as
    dicts, from its stored snapshot (None for a revision without config.json)."""
    from tracker.revision.stored import load_snapshot

    def lints(revision: Any) -> list[dict[str, Any]] | None:
        findings = verify_snapshot(load_snapshot(store, revision))
        return None if findings is None else [f.to_dict() for f in findings]

    return lints
