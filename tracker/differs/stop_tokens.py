"""The stop-token set: the ids generation stops on, per revision, as the union of every file that names one
(generation_config.json `eos_token_id`, config.json's, the tokenizer's eos token) and as each runtime reads them
(`stop_sets`: transformers, vLLM, text-generation-inference, llama.cpp); and whether the chat template ends an
assistant turn with a token each runtime stops on.

A token dropped from the set (or from one runtime's set) is `critical` (a server generates past the end of a turn),
one added `notice`. The end-of-turn check renders a fixed conversation with the sandboxed renderer and reads the
special token that follows the assistant's content; a token that is not in the set of a runtime is a `warning`
naming the runtimes affected.
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
# The files that decide the sets: one not read on either side, no verdict (tokenizer.json, which names the tokens and
# gives llama.cpp its end-of-generation texts, when read on one side only: a large one unread on both is consistent).
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
        self._vocab: dict[str, int] | None = None
        self._texts: dict[int, str] | None = None  # the vocabulary reversed, built on the first id not in by_id
        if doc and isinstance(doc.get("added_tokens"), list):
            self.by_id.update({i: text for text, i in added_token_ids(doc["added_tokens"], self.vocab()).items()})
        self.by_text = {text: i for i, text in self.by_id.items()}

    def _tokenizer_json(self) -> dict[str, Any] | None:
        if TOKENIZER_JSON not in self.snapshot.files:
            return None
        doc = self.snapshot.read_json(TOKENIZER_JSON)[0]
        return doc if isinstance(doc, dict) else None

    def vocab(self) -> dict[str, int]:
        """tokenizer.json's model vocabulary, text -> id (a Unigram model's list of pieces by position)."""
        if self._vocab is None:
            doc = self._tokenizer_json() or {}
            vocab = (doc.get("model") or {}).get("vocab") if isinstance(doc.get("model"), dict) else None
            if isinstance(vocab, list):  # Unigram: [[piece, score], ...], the id is the position
                vocab = {p[0]: i for i, p in enumerate(vocab) if isinstance(p, list) and p and isinstance(p[0], str)}
            self._vocab = vocab if isinstance(vocab, dict) else {}
        return self._vocab

    def text_of(self, token_id: int) -> str | None:
        if token_id in self.by_id:
            return self.by_id[token_id]
        if self._texts is None:  # one pass over the vocabulary, however many ids are named
            self._texts = {}
            for text, i in self.vocab().items():
                if isinstance(i, int):
                    self._texts.setdefault(i, text)
        return self._texts.get(token_id)

    def id_of(self, text: str) -> int | None:
        if text in self.by_text:
            return self.by_text[text]
        found = self.vocab().get(text)
        return found if isinstance(found, int) else None

    def specials(self) -> list[str]:
        """Every special token text known, longest first (for matching what follows a turn)."""
        texts = set(self.by_text) | set(special_tokens(self.snapshot).values())
        return sorted(texts, key=len, reverse=True)


def added_token_ids(added: list[Any], vocab: dict[str, int]) -> dict[str, int]:
    """The ids the `tokenizers` library gives tokenizer.json's added tokens, which are not the ids the file lists:
    loading adds them in the order listed, each taking its id in the model's vocabulary when it is there, else the
    next free id (the vocabulary's size for the first, one past the largest added id after it). A file that lists
    its added tokens out of id order therefore gets ids other than the ones written beside them."""
    assigned: dict[str, int] = {}
    size, top = len(vocab), None  # top: the largest id given to a token the vocabulary does not hold
    for token in added:
        text = token.get("content") if isinstance(token, dict) else None
        if not isinstance(text, str) or text in assigned:
            continue
        if isinstance(vocab.get(text), int):
            assigned[text] = vocab[text]
            continue
        top = size if top is None or (top < size and size > 0) else top + 1
        assigned[text] = top
    return assigned


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


RUNTIMES = ("transformers", "vllm", "tgi", "llama.cpp")
# llama.cpp marks these texts end-of-generation wherever the vocabulary holds them (llama-vocab.cpp, besides the
# eos/eot/eom ids and the fill-in-the-middle pad, repo and file-separator tokens found by text).
LLAMA_CPP_EOG_TEXTS = frozenset({
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>", "<end_of_turn>",
    "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>",
    "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>"})
LLAMA_CPP_FIM_EOG = (("<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"),
                     ("<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"),
                     ("<|file_sep|>",))
GGUF_STOP_KEYS = ("eos", "eot", "eom", "fim_pad", "fim_rep", "fim_sep")


def stop_sets(snapshot: Snapshot, names: TokenNames | None = None) -> dict[str, list[StopToken]]:
    """The ids each runtime stops on, serving this revision as it is (the runtimes' own rules, read in their code):

    - transformers `generate`: generation_config.json's `eos_token_id` when the file exists (none at all when it
      names none), else config.json's; the tokenizer's eos is not consulted;
    - vLLM: the tokenizer's eos, plus the generation config's eos ids (generation_config.json, else config.json);
    - text-generation-inference: generation_config.json's `eos_token_id` when it is a list (it replaces the
      tokenizer's eos), else the tokenizer's eos alone;
    - llama.cpp: a GGUF in the revision: its header's eos, eot, eom (and fill-in-the-middle) ids; otherwise as
      convert_hf_to_gguf writes the model: the tokenizer's eos (config.json's id when the tokenizer names none),
      plus every token of the vocabulary whose text llama.cpp treats as end of generation.
    """
    names = names or TokenNames(snapshot)
    generation, present = _generation(snapshot)
    config_ids = declared_eos_ids(snapshot, CONFIG)
    configured = (declared_eos_ids(snapshot, GENERATION_CONFIG), GENERATION_CONFIG) if present else (config_ids, CONFIG)
    eos_text = special_tokens(snapshot).get("eos_token")
    eos = [] if not eos_text else [(names.id_of(eos_text) if names.id_of(eos_text) is not None else eos_text,
                                    "tokenizer")]
    sets = {
        "transformers": [(i, configured[1]) for i in configured[0]],
        "vllm": eos + [(i, configured[1]) for i in configured[0]],
        "tgi": ([(i, GENERATION_CONFIG) for i in _ids(generation.get("eos_token_id"))]
                if isinstance(generation.get("eos_token_id"), list) else eos),
        "llama.cpp": _llama_cpp(snapshot, names, eos, config_ids),
    }
    return {runtime: _tokens(found, names) for runtime, found in sets.items()}


def _generation(snapshot: Snapshot) -> tuple[dict[str, Any], bool]:
    """generation_config.json as a dict ({} when unreadable), and whether the revision has the file."""
    if GENERATION_CONFIG not in snapshot.files:
        return {}, False
    doc = snapshot.read_json(GENERATION_CONFIG)[0]
    return (doc if isinstance(doc, dict) else {}), True


def _llama_cpp(snapshot: Snapshot, names: TokenNames, eos: list[tuple[Any, str]],
               config_ids: list[int]) -> list[tuple[Any, str]]:
    gguf = next((s.result for _, s in sorted(snapshot.scans.items()) if s.format == "gguf" and s.result), None)
    if gguf is not None and not any(p in snapshot.files for p in TOKENIZER_FILES):
        specials = ((gguf.get("tokenizer") or {}).get("special_tokens") or {})
        return [(v["id"], "gguf") for k, v in specials.items()
                if k in GGUF_STOP_KEYS and isinstance(v, dict) and isinstance(v.get("id"), int)]
    found = list(eos) or [(i, CONFIG) for i in config_ids[:1]]
    for text in sorted(LLAMA_CPP_EOG_TEXTS):
        if (i := names.id_of(text)) is not None:
            found.append((i, "llama.cpp end-of-generation text"))
    for texts in LLAMA_CPP_FIM_EOG:
        i = next((i for t in texts if (i := names.id_of(t)) is not None), None)
        if i is not None:
            found.append((i, "llama.cpp fill-in-the-middle token"))
    ids = {k for k, _ in found}
    texts = {names.text_of(k) if isinstance(k, int) else k for k in ids}
    # llama.cpp's own exceptions: <|end|> is not an end where <|return|> and <|call|> (or <|calls|> and <|flush|>)
    # are, and </s> is not one beside Gemma 4's <|tool_response>.
    dropped = set()
    if "<|end|>" in texts and (("<|return|>" in texts and "<|call|>" in texts) or {"<|calls|>", "<|flush|>"} <= texts):
        dropped.add("<|end|>")
    if "<|tool_response>" in texts and "</s>" in texts:
        dropped.add("</s>")
    return [(k, why) for k, why in found if (names.text_of(k) if isinstance(k, int) else k) not in dropped]


def _tokens(found: list[tuple[Any, str]], names: TokenNames) -> list[StopToken]:
    merged: dict[Any, list[str]] = {}
    for key, source in found:
        sources = merged.setdefault(key, [])
        if source not in sources:
            sources.append(source)
    tokens = [StopToken(k if isinstance(k, int) else None, names.text_of(k) if isinstance(k, int) else k, tuple(v))
              for k, v in merged.items()]
    return sorted(tokens, key=lambda t: (t.id is None, t.id if t.id is not None else 0, t.text or ""))


def by_runtime(sets: dict[str, list[StopToken]]) -> dict[str, list[int | str]]:
    """`stop_tokens.by_runtime` of the JSON output: each runtime mapped to the ids it stops on (a token known only
    by its text, without a tokenizer.json to number it, by its text)."""
    return {runtime: [t.id if t.id is not None else str(t.text) for t in tokens] for runtime, tokens in sets.items()}


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
    """Everything the stop sets and the end-of-turn verdict are computed from, by content: the eos ids the config
    files declare (not the files: another key of config.json moving changes neither), whether generation_config.json
    exists and writes its ids as a list (transformers and text-generation-inference read that), the tokenizer files'
    blob oids and whether their bytes are held, and the chat templates' text."""
    eos = tuple(tuple(declared_eos_ids(snapshot, path)) for path in EOS_FILES)
    generation, present = _generation(snapshot)
    shape = (present, isinstance(generation.get("eos_token_id"), list))
    files = tuple((_oid(snapshot, path), path in snapshot.contents) for path in TOKENIZER_FILES)
    return eos, shape, files, _templates(snapshot)


def _keys(tokens: list[StopToken]) -> dict[Any, StopToken]:
    return {t.id if t.id is not None else t.text: t for t in tokens}


def contains(tokens: list[StopToken], text: str, token_id: int | None) -> bool:
    return any((token_id is not None and t.id == token_id) or (t.text is not None and t.text == text) for t in tokens)


def _moved(before: list[StopToken], after: list[StopToken]) -> tuple[list[StopToken], list[StopToken]]:
    """(dropped, added) between two sets, by id (by text for a token without one)."""
    old_keys, new_keys = _keys(before), _keys(after)
    return [old_keys[k] for k in old_keys if k not in new_keys], [new_keys[k] for k in new_keys if k not in old_keys]


def diff(old: Snapshot | None, new: Snapshot) -> list[Change]:
    """The stop set's change, in the union or in any runtime's set (dropped: critical, added: notice), and an
    end-of-turn token some runtime does not stop on (warning), when an input of either moved (`stop_inputs`)."""
    if old is None or stop_inputs(old) == stop_inputs(new):
        # Same inputs, same stop sets and end-of-turn verdict as the parent's (told when they came): nothing to
        # say, and tokenizer.json is not parsed nor the probe rendered for a config.json move of another key.
        return []
    touched = [p for p in INPUTS if _oid(old, p) != _oid(new, p)]
    unread = [(side, p) for side, snap in (("old", old), ("new", new)) for p in DECIDING if _unread(snap, p)]
    if _unread(old, TOKENIZER_JSON) != _unread(new, TOKENIZER_JSON):  # its vocabulary on one side only (llama.cpp's)
        unread.append(("old" if _unread(old, TOKENIZER_JSON) else "new", TOKENIZER_JSON))
    if unread:  # a file that decides the set was not read (gated, too large): no verdict rather than a false one
        return [_not_compared(touched, unread, old, new)]
    new_names = TokenNames(new)
    # The names come from tokenizer_config.json and tokenizer.json alone: when neither moved, the old ones are
    # the new ones (a large tokenizer.json is parsed once, not twice).
    same_names = all(_oid(old, p) == _oid(new, p) and old.contents.get(p) == new.contents.get(p)
                     for p in (TOKENIZER_CONFIG, TOKENIZER_JSON))
    old_names = new_names if same_names else TokenNames(old)
    before, after = stop_set(old, old_names), stop_set(new, new_names)
    sets_before, sets_after = stop_sets(old, old_names), stop_sets(new, new_names)
    out = []
    dropped, added = _moved(before, after)
    runtimes = {rt: moved for rt in RUNTIMES if any(moved := _moved(sets_before[rt], sets_after[rt]))}
    if dropped or added or runtimes:
        out.append(_set_change(touched, (before, after, dropped, added), (sets_before, sets_after, runtimes)))
    finding = end_of_turn(new, after, new_names, sets_after)
    if finding is not None and finding["not_stopped_by"]:
        out.append(_end_of_turn_change(finding, after, sets_after))
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


def _labels(tokens: list[StopToken]) -> str:
    return ", ".join(t.label for t in tokens)


def _moves(dropped: list[StopToken], added: list[StopToken]) -> str:
    return "; ".join(part for part in (f"dropped {_labels(dropped)}" if dropped else "",
                                       f"added {_labels(added)}" if added else "") if part)


SetsMove = tuple[dict[str, list[StopToken]], dict[str, list[StopToken]],
                 dict[str, tuple[list[StopToken], list[StopToken]]]]


def _set_change(touched: list[str], union: tuple[list[StopToken], ...], sets: SetsMove) -> Change:
    """One change for the union's move and every runtime's: the summary says the union's, then each runtime whose
    own move differs from it (runtimes moving alike named together)."""
    before, after, dropped, added = union
    sets_before, sets_after, runtimes = sets
    own: dict[str, list[str]] = {}
    for runtime, (r_dropped, r_added) in runtimes.items():
        if (_keys(r_dropped), _keys(r_added)) != (_keys(dropped), _keys(added)):
            own.setdefault(_moves(r_dropped, r_added), []).append(runtime)
    parts = [f"stop tokens: {_moves(dropped, added)} (now {_labels(after) or 'none'})"] if dropped or added else []
    parts += [f"{'stop tokens for ' if not parts and i == 0 else ''}{', '.join(rts)}: {move}"
              for i, (move, rts) in enumerate(own.items())]
    detail = {"stop_tokens": {"old": [t.to_dict() for t in before], "new": [t.to_dict() for t in after],
                              "dropped": [t.to_dict() for t in dropped], "added": [t.to_dict() for t in added],
                              "files": touched, "by_runtime": by_runtime(sets_after),
                              "by_runtime_before": by_runtime(sets_before),
                              "runtime_changes": {rt: {"dropped": [t.to_dict() for t in d],
                                                       "added": [t.to_dict() for t in a]}
                                                  for rt, (d, a) in runtimes.items()}}}
    any_dropped = dropped or any(d for d, _ in runtimes.values())
    severity = Severity.CRITICAL if any_dropped else Severity.NOTICE
    path = next((p for p in (GENERATION_CONFIG, CONFIG, TOKENIZER_CONFIG) if p in touched), touched[0] if touched else "")
    return Change(ChangeKind.STOP_TOKENS, path, "; ".join(parts)[:400], severity, detail)


def end_of_turn(snapshot: Snapshot, stops: list[StopToken], names: TokenNames,
                sets: dict[str, list[StopToken]] | None = None) -> dict[str, Any] | None:
    """The special token the default chat template writes right after an assistant's content, whether it is in
    the union (`in_stop_set`) and which runtimes stop on it (`stopped_by`, `not_stopped_by`); None when there is no
    template, it does not render, or no special token follows."""
    templates = effective_templates(snapshot)
    source = templates.get("default") or next(iter(templates.values()), None)
    if source is None:
        return None
    specials = special_tokens(snapshot)
    variables = {"messages": [dict(m) for m in PROBE_MESSAGES], "add_generation_prompt": False, **specials}
    rendered = render_all([RenderRequest(source.text, variables)], now=SAMPLE_NOW)[0]
    finding = read_end_of_turn(rendered.prompt, names.specials(), names, source.where)
    if finding is not None:
        sets = sets if sets is not None else stop_sets(snapshot, names)
        finding["in_stop_set"] = contains(stops, finding["token"], finding["id"])
        stopping = {rt: _stops_on(tokens, finding["token"], finding["id"]) for rt, tokens in sets.items()}
        finding["stopped_by"] = [rt for rt, yes in stopping.items() if yes]
        finding["not_stopped_by"] = [rt for rt, yes in stopping.items() if yes is False]
        finding["undecided"] = [rt for rt, yes in stopping.items() if yes is None]
    return finding


def _stops_on(tokens: list[StopToken], text: str, token_id: int | None) -> bool | None:
    """Whether a runtime's set holds the token; None when it cannot be told: the token's id is unknown (no
    tokenizer.json nor added_tokens_decoder numbers it) and the set holds ids whose text is unknown too."""
    if contains(tokens, text, token_id):
        return True
    if token_id is None and any(t.id is not None and t.text is None for t in tokens):
        return None
    return False


def read_end_of_turn(prompt: str | None, specials: list[str], names: TokenNames, where: str) -> dict[str, Any] | None:
    """The longest special token at the start of what follows the probe content (whitespace skipped)."""
    if prompt is None or PROBE not in prompt:
        return None
    after = prompt.split(PROBE, 1)[1].lstrip()
    token = next((s for s in specials if s and after.startswith(s)), None)
    if token is None:
        return None
    return {"token": token, "id": names.id_of(token), "template": where}


def _end_of_turn_change(finding: dict[str, Any], stops: list[StopToken], sets: dict[str, list[StopToken]]) -> Change:
    label = f"{finding['token']} ({finding['id']})" if finding["id"] is not None else finding["token"]
    missing = finding["not_stopped_by"]
    if not finding["in_stop_set"]:
        summary = (f"chat template ends an assistant turn with {label}, which is not a stop token "
                   f"(generation stops on {_labels(stops) or 'nothing'}; not stopped on by {', '.join(missing)})")
    else:
        summary = (f"chat template ends an assistant turn with {label}, which {', '.join(missing)} "
                   f"{'does' if len(missing) == 1 else 'do'} not stop on ("
                   + "; ".join(f"{rt} stops on {_labels(sets[rt]) or 'nothing'}" for rt in missing) + ")")
    detail = {"end_of_turn": finding, "stop_tokens": [t.to_dict() for t in stops], "by_runtime": by_runtime(sets)}
    return Change(ChangeKind.STOP_TOKENS, finding["template"].split(":")[0], summary[:400], Severity.WARNING, detail)
