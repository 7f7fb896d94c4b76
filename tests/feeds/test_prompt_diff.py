"""The rendered-prompt diff: what is marked inserted or deleted, and what invisible text is made visible."""

from __future__ import annotations

import pytest

from feeds.views.prompt_diff import as_text, diff_prompts


def _marked(before: str, after: str) -> list[tuple[str, str]]:
    return [(p.op, p.text) for line in diff_prompts(before, after).lines for p in line.parts if p.op != "same"]


@pytest.mark.parametrize(
    ("before", "after", "marked"),
    [
        ("a\nhello world\nz\n", "a\nhello there world\nz\n", [("ins", "\u00b7"), ("ins", "there")]),
        ("x<|eot_id|>\n", "x<|eom_id|>\n", [("del", "t"), ("ins", "m")]),
        ("keep\n", "keep\nnew line\n", [("ins", "new"), ("ins", "\u00b7"), ("ins", "line"), ("ins", "\u21b5")]),
        ("a\tb\n", "a\tb \n", [("ins", "\u00b7")]),
        ("same\n", "same\n", []),
    ],
    ids=["word-inserted", "inside-a-token", "line-added", "trailing-space", "unchanged"],
)
def test_changes_are_marked_by_character(before: str, after: str, marked: list[tuple[str, str]]) -> None:
    """Only the characters that changed are marked, with spaces and line ends inside a change made visible."""
    assert _marked(before, after) == marked


def test_control_tokens_and_tabs_are_marked_in_unchanged_text() -> None:
    """Control tokens and tabs are flagged even where nothing changed, so a reader sees them."""
    diff = diff_prompts("<|start_header_id|>user\tx\n", "<|start_header_id|>user\tx\nmore\n")
    parts = diff.lines[0].parts
    assert parts[0].token and parts[0].text == "<|start_header_id|>"
    assert any(p.mark and p.text == "\u2192" for p in parts)


def test_long_unchanged_runs_are_folded() -> None:
    """Unchanged lines far from a change are folded into one counted line."""
    before = "".join(f"line {i}\n" for i in range(50))
    after = before.replace("line 25\n", "line 25 changed\n")
    ops = [line.op for line in diff_prompts(before, after).lines]
    assert ops == ["skip", "same", "same", "change", "same", "same", "skip"]
    assert diff_prompts(before, after).lines[0].skipped == 23


def test_control_characters_are_shown_as_pictures() -> None:
    """A control character in a prompt is shown as its Unicode picture, never emitted raw."""
    text = "".join(p.text for line in diff_prompts("a\n", "a\x1b[31m\n").lines for p in line.parts)
    assert "\x1b" not in text and "\u241b" in text


def test_short_text_form_lists_changed_lines_only() -> None:
    """The feed and chat form keeps changed lines, marks deletions and insertions inline, and says what was cut."""
    diff = diff_prompts("a\nbbb\nc\n", "a\nXYZ!\nc\nd\n")
    assert as_text(diff) == "- bbb\u21b5\n+ XYZ!\u21b5\n+ d\u21b5"
    diff = diff_prompts("hello world\n", "hello brave world\n")
    assert as_text(diff) == "~ hello{+\u00b7brave+} world\u21b5"
    many = diff_prompts("", "".join(f"x{i}\n" for i in range(30)))
    assert as_text(many, max_lines=3).endswith("\u2026 27 more line(s)")
