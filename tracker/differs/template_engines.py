"""The chat template in every runtime: a revision's templates rendered by each engine people serve with.

Engines (`ENGINES`): jinja2 configured as transformers configures it (the reference: transformers, vLLM
and SGLang render with it), minijinja configured as text-generation-inference configures it, and
@huggingface/jinja (transformers.js, chat-ui) through Node where Node and the pinned package are
installed ("not checked" otherwise, never a silent pass). Every engine gets the exact same inputs
(`template_samples`): each effective template with each sample conversation of `chat_samples`, with
`add_generation_prompt` on and off. All rendering happens in the sandboxed workers of `render`.

`matrix` gives `{"template_engines": [...], "template_samples": [...]}` for one snapshot;
`compare` turns two revisions' matrices into changes: an engine a revision breaks (or fixes), named
with its error. `matrix_key` names a matrix by its inputs, so an unchanged template is not rendered again.
"""

from __future__ import annotations

import hashlib
import json
from importlib import metadata
from typing import Any

from tracker.differs.chat_samples import SAMPLE_CONVERSATIONS, SAMPLE_NOW
from tracker.differs.chat_sources import effective_templates, special_tokens
from tracker.differs.render import DEFAULT_LIMITS, JS_DIR, JS_ENGINE, RenderLimits, RenderRequest, js_engine_missing, render_all
from tracker.revision.changes import Change, ChangeKind, Severity
from tracker.revision.snapshot import Snapshot

REFERENCE = "jinja2"
# engine -> the runtimes that render chat templates with it
ENGINES: dict[str, str] = {
    "jinja2": "transformers, vLLM, SGLang",
    "minijinja": "text-generation-inference",
    JS_ENGINE: "transformers.js, chat-ui",
}
MATRIX_VERSION = "1"  # bump when the samples or the engines' settings change: stored matrices are then redone


def template_samples(snapshot: Snapshot) -> list[dict[str, Any]]:
    """The inputs every engine renders: each template x each sample conversation x add_generation_prompt.

    `bos_token`/`eos_token` null: the revision defines none, and the variable is not passed at all.
    """
    tokens = special_tokens(snapshot)
    samples = []
    for name, source in sorted(effective_templates(snapshot).items()):
        for conversation in SAMPLE_CONVERSATIONS:
            for generation in (conversation.add_generation_prompt, not conversation.add_generation_prompt):
                samples.append({
                    "id": f"{name}/{conversation.id}/{'generation' if generation else 'no_generation'}",
                    "template_name": name,
                    "messages": list(conversation.messages),
                    "tools": list(conversation.tools) if conversation.tools else None,
                    "add_generation_prompt": generation,
                    "bos_token": tokens.get("bos_token"),
                    "eos_token": tokens.get("eos_token"),
                    "_text": source.text,
                })
    return samples


def matrix_key(snapshot: Snapshot) -> str | None:
    """What a matrix depends on, hashed (sha256 hex); None when the snapshot has no chat template."""
    samples = template_samples(snapshot)
    if not samples:
        return None
    texts = {s["template_name"]: s["_text"] for s in samples}
    inputs = {"version": MATRIX_VERSION, "templates": texts, "bos": samples[0]["bos_token"], "eos": samples[0]["eos_token"]}
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()


def matrix(snapshot: Snapshot, *, limits: RenderLimits = DEFAULT_LIMITS) -> dict[str, Any] | None:
    """The engine matrix of a snapshot's chat templates; None when it has none."""
    samples = template_samples(snapshot)
    if not samples:
        return None
    texts = sorted({s["_text"] for s in samples})
    requests: list[RenderRequest] = []
    for engine in ENGINES:
        requests += [RenderRequest(text, None, engine) for text in texts]
        requests += [RenderRequest(s["_text"], _variables(s), engine) for s in samples]
    results = iter(render_all(requests, now=SAMPLE_NOW, limits=limits))
    engines = []
    reference: dict[str, str | None] = {}
    for engine in ENGINES:
        parsed = {text: next(results) for text in texts}
        rendered = [next(results) for _ in samples]
        if engine == REFERENCE:
            reference = {s["id"]: r.prompt for s, r in zip(samples, rendered, strict=True)}
        engines.append(_engine_entry(engine, samples, parsed, rendered, reference))
    return {"template_engines": engines, "template_samples": [_public(s) for s in samples]}


def _variables(sample: dict[str, Any]) -> dict[str, Any]:
    """What the engines get: the conversation, its tools (null when none), the flag, the defined tokens."""
    variables = {k: sample[k] for k in ("messages", "tools", "add_generation_prompt")}
    variables.update({k: sample[k] for k in ("bos_token", "eos_token") if sample[k] is not None})
    return variables


def _public(sample: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in sample.items() if not k.startswith("_")}


def _engine_entry(
    engine: str, samples: list[dict[str, Any]], parsed: dict[str, Any], rendered: list[Any], reference: dict[str, str | None]
) -> dict[str, Any]:
    missing = js_engine_missing() if engine == JS_ENGINE else None
    entry: dict[str, Any] = {"engine": engine, "runtimes": ENGINES[engine], "version": _version(engine)}
    if missing is not None:
        return {**entry, "checked": False, "parses": None, "error": missing, "samples": []}
    failures = {text: r.error for text, r in parsed.items() if r.error is not None}
    names = {s["_text"]: s["template_name"] for s in samples}
    error = "; ".join(f"{names[text]}: {reason}" for text, reason in failures.items()) or None
    rows = []
    for sample, result in zip(samples, rendered, strict=True):
        expected = reference.get(sample["id"])
        same = None if expected is None or result.prompt is None else result.prompt == expected
        rows.append({"id": sample["id"], "renders": result.prompt is not None, "error": result.error, "same_as_reference": same})
    return {**entry, "checked": True, "parses": not failures, "error": error, "samples": rows}


def _version(engine: str) -> str | None:
    if engine == JS_ENGINE:
        try:
            return json.loads((JS_DIR / "node_modules" / "@huggingface" / "jinja" / "package.json").read_text())["version"]
        except (OSError, ValueError, KeyError):
            return None
    try:
        return metadata.version(engine)
    except metadata.PackageNotFoundError:
        return None


def compare(old: dict[str, Any] | None, new: dict[str, Any] | None) -> list[Change]:
    """One `warning` per engine a revision breaks or fixes: parsing, a sample's render, or its agreement
    with the reference. Samples or engines only one side has, and engines not checked, are not compared."""
    if not old or not new:
        return []
    before = {e["engine"]: e for e in old["template_engines"]}
    changes = []
    for after in new["template_engines"]:
        prior = before.get(after["engine"])
        if prior is None or not prior.get("checked", True) or not after.get("checked", True):
            continue
        broke, fixed = _moves(prior, after)
        for direction, samples in (("broken", broke), ("fixed", fixed)):
            if samples or (direction == "broken" and prior["parses"] and not after["parses"]) or (
                direction == "fixed" and not prior["parses"] and after["parses"]
            ):
                changes.append(_engine_change(direction, after, samples, prior))
    return changes


def _state(sample: dict[str, Any]) -> int:
    """0 does not render, 1 renders differently from the reference, 2 renders as the reference does
    (or the reference itself failed: nothing to agree with)."""
    if not sample["renders"]:
        return 0
    return 1 if sample["same_as_reference"] is False else 2


def _moves(prior: dict[str, Any], after: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    old = {s["id"]: s for s in prior["samples"]}
    broke, fixed = [], []
    for sample in after["samples"]:
        was = old.get(sample["id"])
        if was is None:
            continue
        if _state(sample) < _state(was):
            broke.append(sample)
        elif _state(sample) > _state(was):
            fixed.append(sample)
    return broke, fixed


def _engine_change(direction: str, engine: dict[str, Any], samples: list[dict[str, Any]], prior: dict[str, Any]) -> Change:
    name = f"{engine['engine']} {engine['version'] or ''}".strip()
    if direction == "broken":
        reason = engine["error"] if not engine["parses"] else next(
            (s["error"] for s in samples if s["error"]), "renders differently from transformers (jinja2)")
        what = "no longer parses" if prior["parses"] and not engine["parses"] else f"breaks {len(samples)} sample(s)"
        summary = f"chat_template: {what} in {name} ({engine['runtimes']}): {reason}"
    else:
        reason = prior["error"] if not prior["parses"] else next((s["error"] for s in prior["samples"] if s["error"]), None)
        summary = f"chat_template: now renders in {name} ({engine['runtimes']})" + (f"; it failed with: {reason}" if reason else "")
    return Change(
        kind=ChangeKind.CHAT_TEMPLATE,
        path="",
        summary=summary[:400],
        severity=Severity.WARNING,
        detail={
            "change": f"engine_{direction}",
            "engine": engine["engine"],
            "version": engine["version"],
            "runtimes": engine["runtimes"],
            "error": reason,
            "samples": [s["id"] for s in samples],
        },
    )
