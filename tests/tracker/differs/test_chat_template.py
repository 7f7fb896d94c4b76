"""The chat template differ on real templates: where transformers finds them, and what changed."""

from __future__ import annotations

from typing import Any

import pytest

from tracker.differs.chat_sources import effective_templates
from tracker.differs.chat_template import RULES, diff
from tracker.differs.render import RenderLimits
from tracker.revision.changes import Change, ChangeKind, Severity

from .chat_fixtures import (
    ALL_TEMPLATES,
    COMMAND_R,
    GEMMA2,
    LLAMA3_FIXED,
    LLAMA3_INITIAL,
    LLAMA3_TOKENS,
    LLAMA32,
    LLAMA33,
    MISTRAL_TOKENS,
    NEMO,
    QWEN2,
    QWEN25,
    named,
    snapshot,
    template,
    tokenizer_config,
)

A, B, C = template(QWEN25), template(LLAMA33), template(GEMMA2)
TC = "tokenizer_config.json"
PROCESSOR = {"preprocessor_config.json": {"image_processor_type": "CLIPImageProcessor"}}
COHERE = {name: template(path) for name, path in COMMAND_R.items()}


def changes_between(old_files: dict[str, Any], new_files: dict[str, Any], **kwargs: Any) -> list[Change]:
    return diff(snapshot(old_files, sha="1" * 40), snapshot(new_files, sha="2" * 40), **kwargs)


# (id, files, {name: (where, text)}) — what transformers 5.x's loaders would use.
PRECEDENCE = [
    ("tokenizer_config.json string", {TC: tokenizer_config(A)}, {"default": ("tokenizer_config.json: chat_template", A)}),
    ("chat_template.jinja overrides tokenizer_config.json", {TC: tokenizer_config(A), "chat_template.jinja": B},
     {"default": ("chat_template.jinja", B)}),
    ("a .jinja file replaces the whole list form", {TC: tokenizer_config(named(default=A, tool_use=C)), "chat_template.jinja": B},
     {"default": ("chat_template.jinja", B)}),
    ("additional templates alone drop the config's default", {TC: tokenizer_config(A), "additional_chat_templates/tool_use.jinja": C},
     {"tool_use": ("additional_chat_templates/tool_use.jinja", C)}),
    ("additional templates sit beside chat_template.jinja", {"chat_template.jinja": A, "additional_chat_templates/tool_use.jinja": C},
     {"default": ("chat_template.jinja", A), "tool_use": ("additional_chat_templates/tool_use.jinja", C)}),
    ("nested folders of additional_chat_templates are not listed", {TC: tokenizer_config(A), "additional_chat_templates/old/x.jinja": C},
     {"default": ("tokenizer_config.json: chat_template", A)}),
    ("an additional default.jinja beats chat_template.jinja", {"chat_template.jinja": A, "additional_chat_templates/default.jinja": B},
     {"default": ("additional_chat_templates/default.jinja", B)}),
    ("list form with names", {TC: tokenizer_config(named(default=A, tool_use=C))},
     {"default": ("tokenizer_config.json: chat_template[name=default]", A),
      "tool_use": ("tokenizer_config.json: chat_template[name=tool_use]", C)}),
    ("mapping form", {TC: tokenizer_config({"default": A, "rag": C})},
     {"default": ("tokenizer_config.json: chat_template[default]", A), "rag": ("tokenizer_config.json: chat_template[rag]", C)}),
    ("the last of two list entries with one name wins", {TC: tokenizer_config(named(default=A) + named(default=B))},
     {"default": ("tokenizer_config.json: chat_template[name=default]", B)}),
    ("chat_template.json of a processor repo", {**PROCESSOR, "chat_template.json": {"chat_template": A}},
     {"default": ("chat_template.json: chat_template", A)}),
    ("tokenizer and processor share one text", {**PROCESSOR, TC: tokenizer_config(A), "chat_template.json": {"chat_template": A}},
     {"default": ("tokenizer_config.json: chat_template, chat_template.json: chat_template", A)}),
    ("the processor prefers chat_template.json to chat_template.jinja",
     {**PROCESSOR, "chat_template.jinja": B, "chat_template.json": {"chat_template": A}},
     {"default": ("chat_template.jinja", B), "default (processor)": ("chat_template.json: chat_template", A)}),
    ("processor_config.json's key beats the files for the processor",
     {"processor_config.json": {"chat_template": C}, "chat_template.jinja": B},
     {"default": ("chat_template.jinja", B), "default (processor)": ("processor_config.json: chat_template", C)}),
    ("a repo without a processor ignores chat_template.jinja's processor rules", {"chat_template.jinja": B, "config.json": {}},
     {"default": ("chat_template.jinja", B)}),
]


@pytest.mark.parametrize(("files", "expected"), [c[1:] for c in PRECEDENCE], ids=[c[0] for c in PRECEDENCE])
def test_effective_templates_follow_transformers_precedence(files: dict[str, Any], expected: dict[str, tuple[str, str]]) -> None:
    """Each template is read from where transformers 5.x's tokenizer and processor loaders read it."""
    found = effective_templates(snapshot(files))
    assert {name: (source.where, source.text) for name, source in found.items()} == expected


def test_effective_templates_name_the_loaders() -> None:
    """A template shared by tokenizer and processor says so; one only the processor reads says that."""
    found = effective_templates(snapshot({**PROCESSOR, "chat_template.jinja": B, "chat_template.json": {"chat_template": A}}))
    assert (found["default"].loaders, found["default (processor)"].loaders) == (("tokenizer",), ("processor",))
    shared = effective_templates(snapshot({**PROCESSOR, "chat_template.jinja": B}))
    assert shared["default"].loaders == ("tokenizer", "processor")


def test_first_revision_has_no_changes() -> None:
    """With no parent snapshot there is nothing to compare."""
    assert diff(None, snapshot({TC: tokenizer_config(A)})) == []


def test_unchanged_templates_report_nothing() -> None:
    """The same templates in the same places give no change."""
    files = {TC: tokenizer_config(named(**COHERE)), "chat_template.jinja": A}
    assert changes_between(files, files) == []


# (id, old files, new files, templates moved)
MOVES = [
    ("string to chat_template.jinja", {TC: tokenizer_config(A)}, {TC: tokenizer_config(), "chat_template.jinja": A}, 1),
    ("config keeps a stale copy", {TC: tokenizer_config(A)}, {TC: tokenizer_config(A), "chat_template.jinja": A}, 1),
    ("list form to .jinja files", {TC: tokenizer_config(named(**COHERE))},
     {TC: tokenizer_config(), "chat_template.jinja": COHERE["default"],
      "additional_chat_templates/tool_use.jinja": COHERE["tool_use"], "additional_chat_templates/rag.jinja": COHERE["rag"]}, 3),
    ("chat_template.json to chat_template.jinja", {**PROCESSOR, TC: tokenizer_config(A), "chat_template.json": {"chat_template": A}},
     {**PROCESSOR, TC: tokenizer_config(), "chat_template.jinja": A}, 1),
    ("list form to mapping form", {TC: tokenizer_config(named(default=A, tool_use=C))},
     {TC: tokenizer_config({"default": A, "tool_use": C})}, 2),
    ("string to list form", {TC: tokenizer_config(A)}, {TC: tokenizer_config(named(default=A))}, 1),
]


@pytest.mark.parametrize(("old", "new", "moved"), [c[1:] for c in MOVES], ids=[c[0] for c in MOVES])
def test_moving_a_template_without_changing_it_is_only_a_note(old: dict[str, Any], new: dict[str, Any], moved: int) -> None:
    """A template that changes place but not text gives one info note per template, with no renders."""
    changes = changes_between(old, new)
    assert len(changes) == moved
    for change in changes:
        assert (change.kind, change.severity, change.security) == (ChangeKind.CHAT_TEMPLATE, Severity.INFO, False)
        assert change.detail["change"] == "moved" and "samples" not in change.detail
        assert change.summary.endswith("; text unchanged")


# (id, old template, new template, tokens, conversations whose prompt changes, what reading it as code adds)
VERSIONS = [
    ("Meta-Llama-3-8B-Instruct add_generation_prompt fix", LLAMA3_INITIAL, LLAMA3_FIXED, LLAMA3_TOKENS, ["tool_call_round_trip"], ""),
    ("Llama 3.3 to Llama 3.2 dates", LLAMA33, LLAMA32, LLAMA3_TOKENS,
     ["system_and_history", "single_user_turn", "tool_call_round_trip"], ""),
    # Qwen2.5 adds a default system prompt ("You are Qwen, created by Alibaba Cloud...") no message supplies
    ("Qwen2 to Qwen2.5", QWEN2, QWEN25, {}, ["single_user_turn", "tool_call_round_trip"], "; read as code: injected-text"),
]


@pytest.mark.parametrize(("old", "new", "tokens", "differing", "suffix"), [c[1:] for c in VERSIONS], ids=[c[0] for c in VERSIONS])
def test_real_version_change_reports_diff_and_rendered_prompts(
    old: str, new: str, tokens: dict[str, str], differing: list[str], suffix: str
) -> None:
    """A real template update gives one warning with the text diff and the prompts before and after."""
    [change] = changes_between({TC: tokenizer_config(template(old), **tokens)}, {TC: tokenizer_config(template(new), **tokens)})
    assert change.summary == (
        f"chat_template (default): template changed; rendered prompt differs for {len(differing)} of 3 sample conversations{suffix}"
    )
    assert (change.severity, change.security, change.path) == (Severity.WARNING, False, TC)
    assert change.detail["diff"].startswith("--- a/tokenizer_config.json: chat_template\n+++ b/tokenizer_config.json: chat_template\n")
    samples = change.detail["samples"]
    assert [s["conversation"] for s in samples if s["differs"]] == differing
    for sample in samples:
        assert (sample["before"] != sample["after"]) == sample["differs"]
        assert "prompt" in sample["after"]


def test_llama3_fix_stops_adding_an_assistant_header_to_finished_chats() -> None:
    """The Llama 3 fix shows in the prompts: a finished chat no longer ends with an open assistant turn."""
    [change] = changes_between({TC: tokenizer_config(template(LLAMA3_INITIAL), **LLAMA3_TOKENS)},
                               {TC: tokenizer_config(template(LLAMA3_FIXED), **LLAMA3_TOKENS)})
    finished = change.detail["samples"][2]
    assert finished["before"]["prompt"].endswith("<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n")
    assert finished["after"]["prompt"].endswith("It is 18 °C and partly cloudy in Paris.<|eot_id|>")
    assert finished["after"]["prompt"].startswith("<|begin_of_text|>")
    assert "+{% if add_generation_prompt %}\n" in change.detail["diff"]


def test_render_errors_are_kept_per_conversation() -> None:
    """A template that refuses a conversation records the error for that conversation only."""
    [change] = changes_between({TC: tokenizer_config(A)}, {TC: tokenizer_config(C, bos_token="<bos>")})
    before, after = change.detail["samples"][0]["before"], change.detail["samples"][0]["after"]
    assert "prompt" in before and after == {"error": "the template raised an error: System role not supported"}
    assert change.detail["samples"][1]["after"] == {
        "prompt": "<bos><start_of_turn>user\nWrite a haiku about autumn leaves.<end_of_turn>\n<start_of_turn>model\n"
    }


def test_infinite_loop_in_a_new_template_is_reported_not_hung() -> None:
    """A template that never ends gets a time-limit error per conversation and the diff returns."""
    endless = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
    [change] = changes_between({TC: tokenizer_config(A)}, {TC: tokenizer_config(endless)}, limits=RenderLimits(time_s=0.2))
    assert [s["after"] for s in change.detail["samples"]] == [{"error": "exceeded the time limit (0.2 s)"}] * 3


# List form: named templates changing one by one.
LIST_EDITS = [
    ("a named template removed", named(**COHERE), named(default=COHERE["default"], tool_use=COHERE["tool_use"]),
     "chat_template (rag): template removed (was in tokenizer_config.json: chat_template[name=rag])"),
    ("a named template added", named(default=COHERE["default"], rag=COHERE["rag"]), named(**COHERE),
     "chat_template (tool_use): template added in tokenizer_config.json: chat_template[name=tool_use]; 1 of 3 sample conversations render"),
    ("a named template changed", named(**COHERE), named(default=COHERE["default"], tool_use=COHERE["tool_use"], rag=A),
     "chat_template (rag): template changed; rendered prompt differs for 3 of 3 sample conversations; read as code: injected-text"),
]


@pytest.mark.parametrize(("old", "new", "summary"), [c[1:] for c in LIST_EDITS], ids=[c[0] for c in LIST_EDITS])
def test_list_form_templates_are_compared_by_name(old: list[dict[str, str]], new: list[dict[str, str]], summary: str) -> None:
    """Named templates of the list form are matched by name; only the edited one is reported."""
    [change] = changes_between({TC: tokenizer_config(old)}, {TC: tokenizer_config(new)})
    assert (change.summary, change.severity) == (summary, Severity.WARNING)


def test_processor_only_change_is_labelled() -> None:
    """A change only the processor sees says so in its summary."""
    old = {**PROCESSOR, TC: tokenizer_config(A), "chat_template.json": {"chat_template": A}}
    [change] = changes_between(old, {**old, "chat_template.json": {"chat_template": B}})
    assert change.summary.startswith("chat_template (default, processor only): template changed;")
    assert change.path == "chat_template.json"


# (id, old tokens, new tokens, extra files, expected summary or None)
TOKEN_CHANGES = [
    ("eos_token used by the template", MISTRAL_TOKENS, {**MISTRAL_TOKENS, "eos_token": "<|im_end|>"}, {},
     "chat_template (default): template unchanged but rendered prompt differs for 2 of 3 sample conversations (eos_token changed)"),
    ("special_tokens_map.json overrides the config", MISTRAL_TOKENS, MISTRAL_TOKENS,
     {"special_tokens_map.json": {"bos_token": "<|begin|>"}},
     "chat_template (default): template unchanged but rendered prompt differs for 3 of 3 sample conversations (bos_token changed)"),
    ("added_tokens_decoder means special_tokens_map.json is not read", {**MISTRAL_TOKENS, "added_tokens_decoder": {}},
     {**MISTRAL_TOKENS, "added_tokens_decoder": {}}, {"special_tokens_map.json": {"bos_token": "<|begin|>"}}, None),
    ("a token the template does not use", MISTRAL_TOKENS, {**MISTRAL_TOKENS, "unk_token": "<UNK>"}, {}, None),
]


@pytest.mark.parametrize(("old", "new", "extra", "summary"), [c[1:] for c in TOKEN_CHANGES], ids=[c[0] for c in TOKEN_CHANGES])
def test_special_token_change_shows_in_rendered_prompts(
    old: dict[str, Any], new: dict[str, Any], extra: dict[str, Any], summary: str | None
) -> None:
    """New special tokens under the same template are a notice only when the prompts change."""
    nemo = template(NEMO)
    changes = changes_between({TC: tokenizer_config(nemo, **old)}, {TC: tokenizer_config(nemo, **new), **extra})
    assert [c.summary for c in changes] == ([summary] if summary else [])
    assert all(c.severity is Severity.NOTICE for c in changes)


def test_shadowed_template_change_is_an_info_note() -> None:
    """Editing the config's template while chat_template.jinja overrides it is an info note only."""
    [change] = changes_between({TC: tokenizer_config(A), "chat_template.jinja": B}, {TC: tokenizer_config(C), "chat_template.jinja": B})
    assert change.summary == (
        "chat_template (default): tokenizer_config.json: chat_template changed but is overridden by chat_template.jinja in transformers 5.x"
    )
    assert change.severity is Severity.INFO


# Malformed or unreadable files: a Change, never an exception. (id, old files, new files, not downloaded, reason)
WITH_PROCESSOR = {**PROCESSOR, "chat_template.jinja": A, "additional_chat_templates/tool_use.jinja": C}
UNREADABLE = [
    ("not JSON", {TC: tokenizer_config(A)}, {TC: b"{\"chat_template\": "}, {}, "tokenizer_config.json is not valid JSON"),
    ("not an object", {TC: tokenizer_config(A)}, {TC: [1, 2]}, {}, "tokenizer_config.json is not a JSON object"),
    ("chat_template of the wrong type", {TC: tokenizer_config(A)}, {TC: {"chat_template": 42}}, {},
     "chat_template is not a string, a list of {name, template}"),
    ("a list entry without its template", {TC: tokenizer_config(A)}, {TC: {"chat_template": [{"name": "default"}]}}, {},
     "chat_template[0] is not a {name, template} pair"),
    ("chat_template.jinja not downloaded", {TC: tokenizer_config(A)}, {TC: tokenizer_config(A)}, {"chat_template.jinja": "file too large"},
     "chat_template.jinja: file too large"),
    ("chat_template.json beside additional templates", WITH_PROCESSOR, {**WITH_PROCESSOR, "chat_template.json": {"chat_template": A}}, {},
     "transformers refuses chat_template.json together with additional_chat_templates"),
]


@pytest.mark.parametrize(("old", "new", "unavailable", "reason"), [c[1:] for c in UNREADABLE], ids=[c[0] for c in UNREADABLE])
def test_unreadable_template_file_is_a_change_not_an_exception(
    old: dict[str, Any], new: dict[str, Any], unavailable: dict[str, str], reason: str
) -> None:
    """A template source that cannot be read gives one warning, no removals, and no repeat next time."""
    broken = snapshot(new, unavailable=unavailable, sha="2" * 40)
    [change] = diff(snapshot(old), broken)
    assert change.severity is Severity.WARNING and "could not be read" in change.summary and reason in change.summary
    assert diff(broken, snapshot(new, unavailable=unavailable, sha="3" * 40)) == []


def test_malformed_config_is_not_read_when_a_jinja_file_wins() -> None:
    """With chat_template.jinja present the config's template is never read, and its lost tokens are not a change."""
    old = {TC: tokenizer_config(A, **LLAMA3_TOKENS), "chat_template.jinja": B}
    assert changes_between(old, {TC: b"{oops", "chat_template.jinja": B}) == []


# One case per rule: (old files, new files). The new side must break that rule.
RULE_CASES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "dunder-attribute": ({TC: tokenizer_config(A)}, {TC: tokenizer_config(A + "{{ ''.__class__.__mro__[1].__subclasses__() }}")}),
    "self-reference": ({TC: tokenizer_config(A)}, {TC: tokenizer_config(A + "{{ self }}")}),
    "template-loading": ({TC: tokenizer_config(A)}, {TC: tokenizer_config("{% include 'shared.jinja' %}" + A)}),
    "attr-filter": ({TC: tokenizer_config(A)}, {TC: tokenizer_config(A + "{{ messages[0]|attr('role') }}")}),
    "python-callables": ({TC: tokenizer_config(A)}, {TC: tokenizer_config("{% set run = getattr %}" + A)}),
    "sandbox-violation": ({TC: tokenizer_config(A)}, {TC: tokenizer_config("{% set last = messages.pop() %}" + A)}),
    "unsafe-template-name": ({TC: tokenizer_config(named(default=A))}, {TC: tokenizer_config(named(default=A, **{"../../tool_use": C}))}),
    "named-form-introduced": ({TC: tokenizer_config(A)}, {TC: tokenizer_config(named(default=A, tool_use=C))}),
}


def test_every_rule_has_a_case() -> None:
    """The rule table and its test cases list the same rules."""
    assert {rule.id for rule in RULES} == set(RULE_CASES)


@pytest.mark.parametrize("rule", sorted(RULE_CASES))
def test_dangerous_construct_makes_the_change_critical(rule: str) -> None:
    """A new template breaking a rule is critical and security-relevant, and says which rule."""
    old, new = RULE_CASES[rule]
    flagged = [c for c in changes_between(old, new) if any(f["rule"] == rule for f in c.detail.get("findings", []))]
    assert flagged, f"no change breaks {rule}"
    for change in flagged:
        assert (change.severity, change.security) == (Severity.CRITICAL, True)
        assert rule in change.summary.split("; dangerous constructs: ")[1]


@pytest.mark.parametrize("name", ALL_TEMPLATES)
def test_real_templates_break_no_rule(name: str) -> None:
    """Adding any real template is a plain warning: namespace, cycler-free macros and raise_exception are fine;
    the one finding real templates have is Qwen2.5's default system prompt, which no message supplies."""
    [change] = changes_between({TC: tokenizer_config()}, {TC: tokenizer_config(), "chat_template.jinja": template(name)})
    assert (change.severity, change.security, change.detail["change"]) == (Severity.WARNING, False, "added")
    rules = {f["rule"] for f in change.detail.get("findings", [])}
    assert rules == ({"injected-text"} if name.startswith("Qwen-Qwen2.5") else set())
