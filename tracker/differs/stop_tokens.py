"""The stop-token set: the union of ids generation stops on (generation_config.json `eos_token_id`, config.json's
`eos_token_id`, the tokenizer's eos token), by id and text, per revision; and whether the chat template ends an
assistant turn with a token of that set.

A token dropped from the set is `critical` (a server generates past the end of a turn), one added `notice`.
The end-of-turn check renders a fixed conversation with the sandboxed renderer and reads the special token
that follows the assistant's content; a token that is not in the stop set is a `warning`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tracker.differs.chat_samples import SAMPLE_NOW
from tracker.differs.chat_sources import SPECIAL_TOKENS_MAP, TOKENIZER_CONFIG, effective_templates, special_tokens
from tracker.differs.render import RenderRequest, render_all
from tracker.revision.changes import Change, ChangeKind, Severity
from tracker.revision.snapshot import Snapshot

GENERATION_CONFIG = "generation_config.json"
CONFIG = "config.json"
TOKENIZER_JSON = "tokenizer.json"
INPUTS = (GENERATION_CONFIG, CONFIG, TOKENIZER_CONFIG, SPECIAL_TOKENS_MAP, TOKENIZER_JSON)
# The files whose eos ids join the set (only those keys of them decide it), and the files read whole.
EOS_FILES = (GENERATION_CONFIG, CONFIG)
TOKENIZER_FILES = (TOKENIZER_CONFIG, SPECIAL_TOKENS_MAP, TOKENIZER_JSON)
# The files that decide the set (tokenizer.json only names its tokens): one not read on either side, no verdict.
DECIDING = (GENERATION_CONFIG, CONFIG, TOKENIZER_CONFIG, SPECIAL_TOKENS_MAP)
PROBE = "hubwatch-end-of-turn-probe"
# The assistant turn is followed by a user turn, so a template that ends only finished turns still ends it.
PROBE_MESSAGES = (
    {"role": "user", "content": "Hello."},
    {"role": "assistant", "content": PROBE},
    {"role": "user", "content": "Thanks."},
)


@dataclass(frozen=True)
class StopToken:
    """One token generation stops on: its id (None when only its text is known), text, and who names it."""

    id: int | None
    text: str | None
    sources: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "text": self.text, "sources": list(self.sources)}

    @property
    def label(self) -> str:
        if self.id is None:
            return str(self.text)
        return f"{self.id} {self.text}" if self.text else str(self.id)


class TokenNames:
    """id <-> text for the special tokens a snapshot declares (tokenizer.json's added tokens, tokenizer_config.json's
    added_tokens_decoder), reaching into tokenizer.json's vocab only for an id or text not found there."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self.by_id: dict[int, str] = {}
        config = snapshot.read_json(TOKENIZER_CONFIG)[0] if TOKENIZER_CONFIG in snapshot.files else None
        decoder = config.get("added_tokens_decoder") if isinstance(config, dict) else None
        for key, token in (decoder or {}).items() if isinstance(decoder, dict) else ():
            if str(key).isdigit() and isinstance(token, dict) and isinstance(token.get("content"), str):
                self.by_id[int(key)] = token["content"]
        doc = self._tokenizer_json()
        for token in (doc.get("added_tokens") or []) if doc else []:
            if isinstance(token, dict) and isinstance(token.get("id"), int) and isinstance(token.get("content"), str):
                self.by_id[token["id"]] = token["content"]
        self.by_text = {text: i for i, text in self.by_id.items()}
        self._vocab: dict[str, int] | None = None

    def _tokenizer_json(self) -> dict[str, Any] | None:
        if TOKENIZER_JSON not in self.snapshot.files:
            return None
        doc = self.snapshot.read_json(TOKENIZER_JSON)[0]
        return doc if isinstance(doc, dict) else None

    def vocab(self) -> dict[str, int]:
        if self._vocab is None:
            doc = self._tokenizer_json() or {}
            vocab = (doc.get("model") or {}).get("vocab") if isinstance(doc.get("model"), dict) else None
            self._vocab = vocab if isinstance(vocab, dict) else {}
        return self._vocab

    def text_of(self, token_id: int) -> str | None:
        if token_id in self.by_id:
            return self.by_id[token_id]
        return next((t for t, i in self.vocab().items() if i == token_id), None)

    def id_of(self, text: str) -> int | None:
        if text in self.by_text:
            return self.by_text[text]
        found = self.vocab().get(text)
        return found if isinstance(found, int) else None

    def specials(self) -> list[str]:
        """Every special token text known, longest first (for matching what follows a turn)."""
        texts = set(self.by_text) | set(special_tokens(self.snapshot).values())
        return sorted(texts, key=len, reverse=True)


def _ids(value: Any) -> list[int]:
    if isinstance(value, bool):
        return []
    if isinstance(value, int):
        return [value]
    if isinstance(value, list):
        return [v for v in value if isinstance(v, int) and not isinstance(v, bool)]
    return []


def stop_set(snapshot: Snapshot, names: TokenNames | None = None) -> list[StopToken]:
    """The union generation stops on, ordered by id (tokens known by text only last)."""
    names = names or TokenNames(snapshot)
    found: dict[Any, list[str]] = {}
    for path in EOS_FILES:
        for i in declared_eos_ids(snapshot, path):
            found.setdefault(i, []).append(path)
    eos = special_tokens(snapshot).get("eos_token")
    if eos:
        eos_id = names.id_of(eos)
        found.setdefault(eos_id if eos_id is not None else eos, []).append("tokenizer")
    tokens = [StopToken(k if isinstance(k, int) else None, names.text_of(k) if isinstance(k, int) else k, tuple(v))
              for k, v in found.items()]
    return sorted(tokens, key=lambda t: (t.id is None, t.id if t.id is not None else 0, t.text or ""))


def declared_eos_ids(snapshot: Snapshot, path: str) -> list[int]:
    """The eos ids one config file declares (`eos_token_id`, else its `text_config`'s); [] when it names none."""
    doc = snapshot.read_json(path)[0] if path in snapshot.files else None
    if not isinstance(doc, dict):
        return []
    ids = _ids(doc.get("eos_token_id"))
    text_config = doc.get("text_config")
    if not ids and isinstance(text_config, dict):
        ids = _ids(text_config.get("eos_token_id"))
    return ids


def stop_inputs(snapshot: Snapshot) -> tuple[Any, ...]:
    """Everything the stop set and the end-of-turn verdict are computed from, by content: the eos ids the config
    files declare (not the files: another key of config.json moving changes neither), the tokenizer files' blob
    oids and whether their bytes are held, and the chat templates' text."""
    eos = tuple(tuple(declared_eos_ids(snapshot, path)) for path in EOS_FILES)
    files = tuple((_oid(snapshot, path), path in snapshot.contents) for path in TOKENIZER_FILES)
    return eos, files, _templates(snapshot)


def _keys(tokens: list[StopToken]) -> dict[Any, StopToken]:
    return {t.id if t.id is not None else t.text: t for t in tokens}


def contains(tokens: list[StopToken], text: str, token_id: int | None) -> bool:
    return any((token_id is not None and t.id == token_id) or (t.text is not None and t.text == text) for t in tokens)


def diff(old: Snapshot | None, new: Snapshot) -> list[Change]:
    """The stop set's change (dropped: critical, added: notice) and an end-of-turn mismatch (warning), when an
    input of either moved (`stop_inputs`)."""
    if old is None or stop_inputs(old) == stop_inputs(new):
        # Same inputs, same stop set and end-of-turn verdict as the parent's (told when they came): nothing to
        # say, and tokenizer.json is not parsed nor the probe rendered for a config.json move of another key.
        return []
    touched = [p for p in INPUTS if _oid(old, p) != _oid(new, p)]
    unread = [(side, p) for side, snap in (("old", old), ("new", new)) for p in DECIDING if _unread(snap, p)]
    if unread:  # a file that decides the set was not read (gated, too large): no verdict rather than a false one
        return [_not_compared(touched, unread, old, new)]
    new_names = TokenNames(new)
    # The names come from tokenizer_config.json and tokenizer.json alone: when neither moved, the old ones are
    # the new ones (a large tokenizer.json is parsed once, not twice).
    same_names = all(_oid(old, p) == _oid(new, p) and old.contents.get(p) == new.contents.get(p)
                     for p in (TOKENIZER_CONFIG, TOKENIZER_JSON))
    before, after = stop_set(old, new_names if same_names else None), stop_set(new, new_names)
    out = []
    old_keys, new_keys = _keys(before), _keys(after)
    dropped = [old_keys[k] for k in old_keys if k not in new_keys]
    added = [new_keys[k] for k in new_keys if k not in old_keys]
    if dropped or added:
        out.append(_set_change(touched, before, after, dropped, added))
    finding = end_of_turn(new, after, new_names)
    if finding is not None and not finding["in_stop_set"]:
        out.append(_end_of_turn_change(finding, after))
    return out


def _unread(snapshot: Snapshot, path: str) -> bool:
    """The file is in the commit but its bytes were not read (the Hub refused them, or over the size limit)."""
    return path in snapshot.files and path not in snapshot.contents and path in snapshot.unavailable


def _not_compared(touched: list[str], unread: list[tuple[str, str]], old: Snapshot, new: Snapshot) -> Change:
    shown = ", ".join(f"{side} {path}" for side, path in unread)
    reason = (new if unread[0][0] == "new" else old).unavailable[unread[0][1]]
    summary = f"stop tokens not compared: {shown} not read ({reason})"
    detail = {"stop_tokens": {"compared": False, "unread": [{"side": s, "path": p} for s, p in unread],
                              "files": touched, "note": reason}}
    path = next((p for p in (GENERATION_CONFIG, CONFIG, TOKENIZER_CONFIG) if p in touched), unread[0][1])
    return Change(ChangeKind.STOP_TOKENS, path, summary[:400], Severity.INFO, detail)


def _oid(snapshot: Snapshot, path: str) -> str | None:
    entry = snapshot.files.get(path)
    return entry.content_id if entry else None


def _templates(snapshot: Snapshot) -> dict[str, str]:
    return {name: source.text for name, source in effective_templates(snapshot).items()}


def _set_change(touched: list[str], before: list[StopToken], after: list[StopToken], dropped: list[StopToken],
                added: list[StopToken]) -> Change:
    parts = []
    if dropped:
        parts.append("dropped " + ", ".join(t.label for t in dropped))
    if added:
        parts.append("added " + ", ".join(t.label for t in added))
    summary = f"stop tokens: {'; '.join(parts)} (now {', '.join(t.label for t in after) or 'none'})"
    detail = {"stop_tokens": {"old": [t.to_dict() for t in before], "new": [t.to_dict() for t in after],
                              "dropped": [t.to_dict() for t in dropped], "added": [t.to_dict() for t in added],
                              "files": touched}}
    severity = Severity.CRITICAL if dropped else Severity.NOTICE
    path = next((p for p in (GENERATION_CONFIG, CONFIG, TOKENIZER_CONFIG) if p in touched), touched[0] if touched else "")
    return Change(ChangeKind.STOP_TOKENS, path, summary[:400], severity, detail)


def end_of_turn(snapshot: Snapshot, stops: list[StopToken], names: TokenNames) -> dict[str, Any] | None:
    """The special token the default chat template writes right after an assistant's content, and whether
    generation stops on it; None when there is no template, it does not render, or no special token follows."""
    templates = effective_templates(snapshot)
    source = templates.get("default") or next(iter(templates.values()), None)
    if source is None:
        return None
    specials = special_tokens(snapshot)
    variables = {"messages": [dict(m) for m in PROBE_MESSAGES], "add_generation_prompt": False, **specials}
    rendered = render_all([RenderRequest(source.text, variables)], now=SAMPLE_NOW)[0]
    finding = read_end_of_turn(rendered.prompt, names.specials(), names, source.where)
    if finding is not None:
        finding["in_stop_set"] = contains(stops, finding["token"], finding["id"])
    return finding


def read_end_of_turn(prompt: str | None, specials: list[str], names: TokenNames, where: str) -> dict[str, Any] | None:
    """The longest special token at the start of what follows the probe content (whitespace skipped)."""
    if prompt is None or PROBE not in prompt:
        return None
    after = prompt.split(PROBE, 1)[1].lstrip()
    token = next((s for s in specials if s and after.startswith(s)), None)
    if token is None:
        return None
    return {"token": token, "id": names.id_of(token), "template": where}


def _end_of_turn_change(finding: dict[str, Any], stops: list[StopToken]) -> Change:
    label = f"{finding['token']} ({finding['id']})" if finding["id"] is not None else finding["token"]
    summary = (f"chat template ends an assistant turn with {label}, which is not a stop token "
               f"(generation stops on {', '.join(t.label for t in stops) or 'nothing'})")
    detail = {"end_of_turn": finding, "stop_tokens": [t.to_dict() for t in stops]}
    return Change(ChangeKind.STOP_TOKENS, finding["template"].split(":")[0], summary[:400], Severity.WARNING, detail)
