"""What a revision does, for its page: the chat template in every runtime (the engine matrix), the tokenizer's
behaviour on the corpus, and the stop-token set, read off the revision's changes and its stored matrix."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass
class EngineRow:
    engine: str
    runtimes: str
    version: str
    status: str  # "parses", "does not parse", "not checked"
    renders: str  # "12 of 12 samples render, 12 as the reference"
    error: str


@dataclass
class BehaviourView:
    engines: list[EngineRow] = field(default_factory=list)
    samples: int = 0
    tokenizer: list[str] = field(default_factory=list)  # lines about the corpus tokenized before and after
    stop_tokens: list[str] = field(default_factory=list)  # lines about the stop set and the end of turn

    @property
    def empty(self) -> bool:
        return not (self.engines or self.tokenizer or self.stop_tokens)


def behaviour_view(changes: Iterable[Mapping[str, Any]], extras: Mapping[str, Any] | None) -> BehaviourView:
    """`changes` as dicts (kind, detail); `extras`: {template_engines, template_samples, tokenizer_behaviour} as
    `show --json` gives them (the tokenizer's "checked, unchanged" value when no change carries one)."""
    view = BehaviourView()
    extras = extras or {}
    for engine in extras.get("template_engines") or []:
        view.engines.append(_engine_row(engine))
    view.samples = len(extras.get("template_samples") or [])
    for change in changes:
        detail = change.get("detail") if isinstance(change.get("detail"), Mapping) else {}
        if change.get("kind") == "tokenizer" and isinstance(detail.get("tokenizer_behaviour"), Mapping):
            view.tokenizer += _tokenizer_lines(detail["tokenizer_behaviour"])
        elif change.get("kind") == "stop_tokens":
            view.stop_tokens += _stop_lines(detail)
    if not view.tokenizer and isinstance(extras.get("tokenizer_behaviour"), Mapping):
        view.tokenizer += _tokenizer_lines(extras["tokenizer_behaviour"])
    return view


def _engine_row(engine: Mapping[str, Any]) -> EngineRow:
    samples = engine.get("samples") or []
    if engine.get("checked") is False:
        status, renders = "not checked", ""
    else:
        status = "parses" if engine.get("parses") else "does not parse"
        rendering = sum(1 for s in samples if s.get("renders"))
        same = sum(1 for s in samples if s.get("same_as_reference") is not False and s.get("renders"))
        renders = f"{rendering} of {len(samples)} samples render, {same} as the reference"
    errors = [str(engine["error"])] if engine.get("error") else []
    errors += sorted({f"{s['id']}: {s['error']}" for s in samples if s.get("error")})[:3]
    return EngineRow(str(engine.get("engine")), str(engine.get("runtimes") or ""), str(engine.get("version") or ""),
                     status, renders, "; ".join(errors)[:600])


def _tokenizer_lines(value: Mapping[str, Any]) -> list[str]:
    if value.get("compared") is False:
        return [f"not compared: {value.get('note')}"]
    if value.get("changed") is False:
        return [str(value.get("note") or "checked, unchanged")]
    ids, tokens = value.get("ids_changed") or {}, value.get("tokens") or {}
    total = (value.get("corpus") or {}).get("samples")
    lines = [f"{ids.get('count', 0):,} of {total:,} corpus samples get different ids" if total else
             f"{ids.get('count', 0):,} corpus samples get different ids"]
    if tokens.get("old") != tokens.get("new"):
        lines.append(f"tokens over the corpus: {tokens.get('old'):,} -> {tokens.get('new'):,}")
    for name, change in (value.get("special_ids_changed") or {}).items():
        old, new = change.get("old") or {}, change.get("new") or {}
        lines.append(f"{name}: {old.get('token')} ({old.get('id')}) -> {new.get('token')} ({new.get('id')})")
    trips = value.get("roundtrip_failures") or {}
    if trips.get("appeared") or trips.get("vanished"):
        lines.append(f"round-trip failures: {len(trips.get('appeared') or [])} appeared, {len(trips.get('vanished') or [])} vanished")
    return lines


def _label(token: Mapping[str, Any]) -> str:
    return f"{token.get('text')} ({token.get('id')})" if token.get("text") else str(token.get("id"))


def _stop_lines(detail: Mapping[str, Any]) -> list[str]:
    stops, lines = detail.get("stop_tokens"), []
    if isinstance(stops, Mapping):
        lines.append("generation stops on: " + (", ".join(_label(t) for t in stops.get("new") or []) or "nothing"))
        if stops.get("dropped"):
            lines.append("dropped: " + ", ".join(_label(t) for t in stops["dropped"]))
        if stops.get("added"):
            lines.append("added: " + ", ".join(_label(t) for t in stops["added"]))
        union = [[t.get("id") for t in stops.get(word) or []] for word in ("dropped", "added")]
        for runtime, moved in (stops.get("runtime_changes") or {}).items():
            if [[t.get("id") for t in moved.get(word) or []] for word in ("dropped", "added")] == union:
                continue  # moved as the union did: said above
            parts = [f"{word} " + ", ".join(_label(t) for t in moved.get(word) or [])
                     for word in ("dropped", "added") if moved.get(word)]
            lines.append(f"{runtime}: " + "; ".join(parts))
    finding = detail.get("end_of_turn")
    if isinstance(finding, Mapping):
        missing = finding.get("not_stopped_by")
        verdict = ("a stop token" if finding.get("in_stop_set") else "which is not a stop token") if not missing \
            else f"which {', '.join(missing)} {'does' if len(missing) == 1 else 'do'} not stop on"
        lines.append(f"the chat template ends an assistant turn with {finding.get('token')} ({finding.get('id')}), "
                     f"{verdict}")
    return lines
