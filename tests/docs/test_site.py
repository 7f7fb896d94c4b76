"""The documentation site builds with `mkdocs build --strict`: with the repo's mkdocs.yml when there is one,
else with a configuration holding only the generated pages (docs/reference and performance.md)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from refdocs.cli import anchor, walk

from tracker.cli import cli

ROOT = Path(__file__).resolve().parents[2]
GENERATED_PAGES = ["reference/cli.md", "reference/configuration.md", "reference/http-api.md",
                   "reference/webhook-payloads.md", "reference/events.md", "performance.md"]
MINIMAL = {
    "site_name": "hubwatch",
    "docs_dir": str(ROOT / "docs"),
    "theme": {"name": "material"},
    "hooks": [str(ROOT / "docs" / "hooks" / "reference.py")],
    # attr_list before mkdocs-click: mkdocs-click gives headings their full command path as id only then
    "markdown_extensions": ["attr_list", "mkdocs-click", "tables", {"toc": {"permalink": True}}],
    "exclude_docs": "/hooks/\n",
    "nav": GENERATED_PAGES,
    "plugins": [],  # no search index: the test is about the pages
}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site built strictly into a temporary folder (the repo's mkdocs.yml, else the minimal configuration)."""
    folder = tmp_path_factory.mktemp("site")
    config = ROOT / "mkdocs.yml"
    if not config.exists():
        config = folder / "mkdocs.yml"
        config.write_text(yaml.safe_dump(MINIMAL), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NO_MKDOCS_2_WARNING": "1"}
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(folder / "out")],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-4000:]
    return folder / "out"


def test_site_builds_strictly_with_every_generated_page(site: Path) -> None:
    """Every generated page is in the built site, its markers all replaced."""
    for page in GENERATED_PAGES:
        html = (site / page.removesuffix(".md") / "index.html").read_text(encoding="utf-8")
        assert "generated:" not in html, page


def test_cli_page_documents_every_command(site: Path) -> None:
    """mkdocs-click wrote a section for every visible command, and no click sentinel leaks into its defaults."""
    html = (site / "reference" / "cli" / "index.html").read_text(encoding="utf-8")
    for ctx, command in walk(cli):
        if not command.hidden:
            assert f'id="{anchor(ctx)}"' in html, ctx.command_path
    assert "Sentinel" not in html
