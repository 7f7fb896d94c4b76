"""The generated reference pages: each lists every command, setting, route, format field and kind the code
has, and the performance table shows every row of the benchmark results."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from refdocs import RENDERERS, UnknownMarker, cli, configuration, events, expand, http_api, lints, markers, performance, webhooks
from refdocs.markdown import cell

from feeds.webhooks import FORMATS
from storage import kinds
from tracker.cli import cli as root
from tracker.config import SECTIONS

SAMPLE_RESULTS = Path(__file__).with_name("results.sample.json")
PAGES = Path(__file__).resolve().parents[2] / "docs"


def test_cli_table_lists_every_command() -> None:
    """The command table links every visible command and subcommand, with its one-sentence summary."""
    page = cli.render()
    for ctx, command in cli.walk(root):
        if ctx.parent is not None and not command.hidden:
            assert f"[`{ctx.command_path}`](#{cli.anchor(ctx)})" in page
    assert "hubwatch advisories show" not in page  # hidden: `advisories REPO` runs it
    assert "| [`hubwatch watch add`](#hubwatch-watch-add) | Watch REPO (org/name); several at once" in page


def test_configuration_page_lists_every_key() -> None:
    """Every [section] key appears with its type, default and variable, and every [[watch]]/[[webhooks]] key too."""
    page = configuration.render()
    for name, model in SECTIONS.items():
        assert f"## `[{name}]`" in page
        for key in model.model_fields:
            assert f"| `{key}` |" in page and f"`{configuration.env_variable(name, key)}`" in page
    for model in configuration.ENTRIES:
        assert f"## `[[{model.array}]]`" in page
        assert all(f"| `{key}` |" in page for key in model.model_fields)
    assert '| `port` | integer | `8600` | `HUBWATCH_SERVER_PORT` |' in page
    assert '| `repo` | string | *required* |' in page
    assert '`["5s", "5m", "30m", "2h", "5h", "10h", "14h", "20h", "24h"]`' in page


def test_http_api_page_lists_every_operation() -> None:
    """Every path and method of the OpenAPI document has its section, and every schema its table."""
    document = http_api.openapi_document()
    page = http_api.render(document)
    found = http_api.operations(document)
    assert len(found) > 25 and ("POST", "/hooks/hub") in {(m, p) for m, p, _ in found}
    for method, path, operation in found:
        assert f"### {method} `{path}`" in page
        assert all(f"| `{status}` |" in page for status in operation["responses"])
    assert all(f"{{ #schema-{name.lower()} }}" in page for name in document["components"]["schemas"])


def test_webhook_page_shows_every_format_with_fields_and_example() -> None:
    """Each format has its field table and an example message; posted formats show their headers."""
    page = webhooks.render()
    for name in FORMATS:
        assert f"## {name} {{ #{name} }}" in page
        assert all(f"| `{path}` |" in page for path in webhooks.MODULES[name].FIELDS)
    # one example each, and a dataset revision's for every format but Apprise (which carries the summaries only)
    assert page.count("```json\n") == 2 * len(FORMATS) - 1
    assert page.count("Example message for a dataset revision") == len(FORMATS) - 1 and '"dataset": {' in page
    assert "webhook-signature: v1," in page and page.count("webhook-id: msg_") == 3  # generic, slack, discord


def test_events_page_lists_every_kind() -> None:
    """Every event kind, change kind and severity is a row with its description."""
    page = events.render()
    for name, text in [*kinds.EVENT_KIND_DESCRIPTIONS.items(), *kinds.CHANGE_KIND_DESCRIPTIONS.items(),
                       *kinds.SEVERITY_DESCRIPTIONS.items()]:
        assert f"| `{name}` | {cell(text)} |" in page


def test_lints_page_lists_every_rule() -> None:
    """Every lint of the verifier is a row and a section with its severity, what it checks, evidence and fix."""
    from estimator.lint_rules import RULES

    page = lints.render()
    for rule in RULES.values():
        assert f"| [`{rule.id}`](#{rule.id}) | `{rule.severity}` | {cell(rule.title)} |" in page
        assert f"### {rule.id} {{ #{rule.id} }}" in page
        assert all(text in page for text in (rule.checks, rule.evidence, rule.fix))
    assert "<!-- generated: lints -->" in (PAGES / "concepts" / "verifier.md").read_text()


def test_performance_table_shows_every_result_row() -> None:
    """Each row of the runner's results is a table row: value with its unit, ratio, goal with direction and margin."""
    page = performance.render(SAMPLE_RESULTS)
    rows = json.loads(SAMPLE_RESULTS.read_text())["rows"]
    assert all(f"| `{row['benchmark']}` |" in page for row in rows)
    assert "| 1.84 s | 2.3 s | 0.80× | ≤ 2 s (± 20%) | pass | daemon, sqlite |" in page
    assert "| feed requests \\| second | 310 req/s | 400 req/s | 0.78× | ≥ 400 req/s (± 10%) | **short** |" in page
    assert "cold &lt;cache&gt; after \\*restart\\*" in page
    assert "| — | — | — | — | not run |" in page
    assert "commit `a9c137f0e9e3`" in page


def test_performance_without_results_says_so(tmp_path: Path) -> None:
    """No results file: one sentence saying none are committed yet, not an empty table."""
    assert performance.render(tmp_path / "results.json").startswith("No results committed yet")


@pytest.mark.parametrize("content, message", [
    ("not json", "not JSON"),
    ('{"rows": {}}', "no rows list"),
    ('{"rows": [{"benchmark": "b"}]}', "rows\\[0\\] has no figure"),
    ('{"rows": [ROW]}', "status must be one of"),
], ids=["not-json", "rows-not-a-list", "missing-keys", "unknown-status"])
def test_malformed_results_fail_the_build(tmp_path: Path, content: str, message: str) -> None:
    """A results file not in the runner's format is an error naming what is wrong, never a wrong table."""
    row = dict.fromkeys(performance.ROW_KEYS, None) | {"direction": "lower", "status": "passed", "tags": []}
    path = tmp_path / "results.json"
    path.write_text(content.replace("ROW", json.dumps(row)), encoding="utf-8")
    with pytest.raises(performance.ResultsError, match=message):
        performance.render(path)


def test_markers_expand_and_unknown_ones_fail() -> None:
    """A marker line becomes its generated part; a name no renderer makes is an error, not a silent gap."""
    page = expand("# Events\n\n<!-- generated: events -->\n\nafter\n")
    assert page.startswith("# Events\n\n## Event kinds") and page.endswith("\n\nafter\n") and "<!--" not in page
    with pytest.raises(UnknownMarker, match="'evnets'"):
        expand("<!-- generated: evnets -->\n")


def test_every_stub_page_asks_for_a_known_part() -> None:
    """The stub pages' markers name renderers, and every renderer is used by some page."""
    used = [name for page in PAGES.rglob("*.md") for name in markers(page.read_text(encoding="utf-8"))]
    assert sorted(used) == sorted(RENDERERS)


def test_every_docs_path_the_product_names_exists():
    """`hubwatch --help`, error messages and docstrings point at pages that exist (a moved page fails here)."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    named = {}
    for package in ("tracker", "feeds", "storage", "estimator"):
        for path in (root / package).rglob("*.py"):
            for found in re.findall(r"\bdocs/[\w/.-]+\.md\b", path.read_text()):
                named.setdefault(found, path.relative_to(root).as_posix())
    assert "docs/reference/configuration.md" in named  # the help's epilog was read
    assert [f"{page} (named in {where})" for page, where in sorted(named.items()) if not (root / page).is_file()] == []
