"""The chat template in every runtime: the engine matrix of a revision and the changes between two."""

from __future__ import annotations

import pytest

from tracker.differs import template_engines
from tracker.differs.chat_samples import SAMPLE_CONVERSATIONS, SAMPLE_NOW
from tracker.differs.render import JS_ENGINE, RenderLimits, RenderRequest, js_engine_missing, render_all
from tracker.revision.changes import ChangeKind, Severity

from .chat_fixtures import QWEN2, snapshot, template, tokenizer_config

TC = "tokenizer_config.json"
TOKENS = {"bos_token": "<s>", "eos_token": "<|im_end|>"}
PLAIN = template(QWEN2)
# The same real Qwen2 ChatML template with the assistant turn wrapped in `{% generation %}`, the marker TRL's
# assistant_only_loss needs and transformers accepts; minijinja (TGI) refuses it ("unknown statement generation").
TURN = "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
GENERATION = PLAIN.replace(TURN, (
    "{% if message['role'] == 'assistant' %}{{'<|im_start|>assistant\n'}}{% generation %}"
    "{{ message['content'] + '<|im_end|>' }}{% endgeneration %}{{ '\n' }}{% else %}" + TURN + "{% endif %}"
))
needs_node = pytest.mark.skipif(js_engine_missing() is not None, reason="@huggingface/jinja needs Node and `npm ci`")


def _matrix(text: str) -> dict:
    return template_engines.matrix(snapshot({TC: tokenizer_config(text, **TOKENS)}))


def _engine(matrix: dict, name: str) -> dict:
    return next(e for e in matrix["template_engines"] if e["engine"] == name)


def test_fixture_really_adds_generation_markers() -> None:
    """The generation variant differs from the real template only by its markers."""
    assert GENERATION != PLAIN and "{% generation %}" in GENERATION


def test_samples_are_the_exact_inputs_of_every_engine() -> None:
    """Each sample conversation appears with add_generation_prompt on and off, with the revision's tokens."""
    samples = _matrix(PLAIN)["template_samples"]
    assert len(samples) == 2 * len(SAMPLE_CONVERSATIONS)
    assert {(s["id"].split("/")[1], s["add_generation_prompt"]) for s in samples} == {
        (c.id, flag) for c in SAMPLE_CONVERSATIONS for flag in (True, False)}
    for s in samples:
        assert set(s) == {"id", "template_name", "messages", "tools", "add_generation_prompt", "bos_token", "eos_token"}
        assert (s["template_name"], s["bos_token"], s["eos_token"]) == ("default", "<s>", "<|im_end|>")


def test_a_plain_chatml_template_renders_alike_in_every_engine() -> None:
    """The real Qwen2 template parses everywhere; the samples jinja2 renders, minijinja renders identically, and
    the tool-call samples (assistant turns without content) fail in both."""
    matrix = _matrix(PLAIN)
    reference = {s["id"]: s["renders"] for s in _engine(matrix, "jinja2")["samples"]}
    assert sorted(i for i, ok in reference.items() if not ok) == [
        "default/tool_call_round_trip/generation", "default/tool_call_round_trip/no_generation"]
    engine = _engine(matrix, "minijinja")
    assert (engine["parses"], engine["error"], engine["checked"]) == (True, None, True) and engine["version"]
    assert {s["id"]: s["renders"] for s in engine["samples"]} == reference
    assert all(s["same_as_reference"] is (True if s["renders"] else None) for s in engine["samples"])


def test_generation_markers_parse_in_jinja2_but_not_in_minijinja() -> None:
    """minijinja's parse error is reported with its line, and every sample then fails there."""
    matrix = _matrix(GENERATION)
    assert _engine(matrix, "jinja2")["parses"] is True
    mini = _engine(matrix, "minijinja")
    assert mini["parses"] is False
    assert mini["error"] == "default: template syntax error on line 4: unknown statement generation"
    assert not any(s["renders"] for s in mini["samples"])


def test_a_revision_breaking_minijinja_is_a_warning_naming_engine_and_error() -> None:
    """Adding generation markers breaks TGI: one warning for minijinja, none for jinja2."""
    changes = template_engines.compare(_matrix(PLAIN), _matrix(GENERATION))
    broken = [c for c in changes if c.detail["engine"] == "minijinja"]
    assert len(broken) == 1 and not [c for c in changes if c.detail["engine"] == "jinja2"]
    [change] = broken
    assert (change.kind, change.severity, change.detail["change"]) == (ChangeKind.CHAT_TEMPLATE, Severity.WARNING, "engine_broken")
    assert change.summary.startswith("chat_template: no longer parses in minijinja ")
    assert "text-generation-inference" in change.summary and "unknown statement generation" in change.summary


def test_glm_45s_real_template_breaks_tool_calls_in_minijinja_only() -> None:
    """zai-org/GLM-4.5-Air's template (SOURCES.md) passes `ensure_ascii=False` to `tojson`: transformers' jinja2 renders
    every sample, minijinja (TGI) parses it but fails each tool-call sample on the keyword, with its line."""
    matrix = _matrix(template("zai-org-GLM-4.5-Air/chat_template.jinja"))
    assert all(s["renders"] for s in _engine(matrix, "jinja2")["samples"])
    mini = _engine(matrix, "minijinja")
    assert mini["parses"] is True
    failed = {s["id"]: s["error"] for s in mini["samples"] if not s["renders"]}
    assert sorted(failed) == ["default/tool_call_round_trip/generation", "default/tool_call_round_trip/no_generation"]
    assert set(failed.values()) == {"too many arguments: unknown keyword argument 'ensure_ascii' (line 11)"}


def test_the_revision_that_fixes_it_is_reported_too() -> None:
    """Removing the markers again fixes minijinja, with the error it used to fail with."""
    [change] = [c for c in template_engines.compare(_matrix(GENERATION), _matrix(PLAIN)) if c.detail["engine"] == "minijinja"]
    assert change.detail["change"] == "engine_fixed"
    assert "unknown statement generation" in change.detail["error"]


def test_an_unchanged_template_has_the_same_key_and_no_change() -> None:
    """Same text and tokens: same key (nothing rendered again), and comparing the matrices finds nothing."""
    a = snapshot({TC: tokenizer_config(PLAIN, **TOKENS)}, sha="a" * 40)
    b = snapshot({TC: tokenizer_config(PLAIN, **TOKENS), "README.md": "new"}, sha="b" * 40)
    assert template_engines.matrix_key(a) == template_engines.matrix_key(b) is not None
    assert template_engines.compare(_matrix(PLAIN), _matrix(PLAIN)) == []
    assert template_engines.matrix_key(snapshot({TC: tokenizer_config(None)})) is None


LOOPING = "{% for i in range(100000) %}{% for j in range(100000) %}{{ '' }}{% endfor %}{% endfor %}"


RECURSING = "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"


@pytest.mark.parametrize("text", [LOOPING, RECURSING], ids=["looping", "recursing"])
def test_a_template_that_loops_or_recurses_is_a_note_per_engine(text: str) -> None:
    """Runaway templates come back as errors from every engine, bounded in time; the matrix is still built.
    At a 0.3 s limit per render (the default 2 s gives the same errors for ~35 CPU-s over 18 renders): jinja2
    interrupted, minijinja out of fuel or past the limit, Node's worker killed."""
    timed_out = "exceeded the time limit (0.3 s)"
    matrix = template_engines.matrix(snapshot({TC: tokenizer_config(text, **TOKENS)}), limits=RenderLimits(time_s=0.3))
    for engine in matrix["template_engines"]:
        if engine["checked"]:
            assert engine["samples"] and all(not s["renders"] and s["error"] for s in engine["samples"]), engine["engine"]
    if text == LOOPING:
        errors = {e["engine"]: {s["error"] for s in e["samples"]} for e in matrix["template_engines"] if e["checked"]}
        assert errors["jinja2"] == {timed_out}
        # minijinja: out of fuel, or (on a loaded machine, its fuel not spent in time) interrupted or its worker stopped
        fuel = "engine ran out of fuel (line 1)"
        assert all(e == fuel or e.startswith(timed_out) for e in errors["minijinja"]), errors["minijinja"]
        assert all(e.startswith(timed_out) for e in errors.get(JS_ENGINE, set())), errors[JS_ENGINE]


def test_minijinja_runs_out_of_fuel_before_the_time_limit() -> None:
    """minijinja's fuel stops a runaway loop (the alarm cannot interrupt Rust code that never calls Python)."""
    [rendered] = render_all([RenderRequest(LOOPING, {"messages": []}, "minijinja")], now=SAMPLE_NOW)
    assert rendered.error == "engine ran out of fuel (line 1)"


@needs_node
def test_huggingface_jinja_renders_like_the_reference() -> None:
    """@huggingface/jinja through Node renders the real template as transformers does."""
    engine = _engine(_matrix(PLAIN), JS_ENGINE)
    assert (engine["checked"], engine["parses"], engine["version"]) == (True, True, "0.5.11")
    assert all(s["same_as_reference"] is (True if s["renders"] else None) for s in engine["samples"])


def test_without_node_the_js_engine_says_not_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    """No Node on PATH: the engine is listed as not checked, never as a pass, and is not compared."""
    monkeypatch.setenv("PATH", "/nonexistent")
    engine = _engine(_matrix(PLAIN), JS_ENGINE)
    assert (engine["checked"], engine["parses"], engine["samples"]) == (False, None, [])
    assert engine["error"].startswith("not checked: Node.js is not installed")


def test_a_1_mb_template_is_bounded_in_every_engine() -> None:
    """A 1 MB template (the real Qwen2 template after 1 MB of literal text) parses, and every engine stops each
    render at the output cap with a readable error; the revision that grows it is an engine break per engine."""
    huge = "x" * 2**20 + PLAIN
    matrix = _matrix(huge)
    plain = {e["engine"]: {s["id"]: s["renders"] for s in e["samples"]} for e in _matrix(PLAIN)["template_engines"]}
    checked = [e for e in matrix["template_engines"] if e["checked"]]
    assert {e["engine"] for e in checked} >= {"jinja2", "minijinja"}
    for engine in checked:
        assert engine["parses"] is True, engine["error"]
        assert not any(s["renders"] for s in engine["samples"])
        capped = [s for s in engine["samples"] if plain[engine["engine"]][s["id"]]]  # those that render at normal size
        assert capped and all(s["error"] == "output exceeded the limit of 65536 characters" for s in capped)
    broken = {c.detail["engine"] for c in template_engines.compare(_matrix(PLAIN), matrix) if c.detail["change"] == "engine_broken"}
    assert broken == {e["engine"] for e in checked}
