"""The PostgreSQL pass (`-m postgres`, .ci/run) fails rather than skips, or quietly tests SQLite again, when it
has no server to run on."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _pytest(*args: str, server: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "HUBWATCH_TEST_POSTGRES"}
    if server is not None:
        env["HUBWATCH_TEST_POSTGRES"] = server
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--collect-only", *args]
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("markexpr", ["postgres", "groundtruth or postgres"])
def test_the_postgres_pass_without_a_server_is_an_error(markexpr: str) -> None:
    """`-m postgres`, alone or beside the ground truth as CI runs it, with HUBWATCH_TEST_POSTGRES unset stops with a
    usage error naming the variable."""
    result = _pytest("-m", markexpr, "tests/storage/test_storage_bounds.py", server=None)
    assert result.returncode == pytest.ExitCode.USAGE_ERROR, result.stdout + result.stderr
    assert "set HUBWATCH_TEST_POSTGRES" in result.stderr


def test_a_server_that_does_not_answer_is_an_error() -> None:
    """A PostgreSQL URL nobody answers at stops the run before any test, with the reason."""
    result = _pytest("-m", "postgres", "tests/storage/test_storage_bounds.py", server="postgresql+psycopg://nobody@127.0.0.1:9/postgres")
    assert result.returncode == pytest.ExitCode.USAGE_ERROR, result.stdout + result.stderr
    assert "HUBWATCH_TEST_POSTGRES is set but its server does not answer" in result.stderr


class _Config:
    def __init__(self, markexpr: str) -> None:
        self.markexpr = markexpr

    def getoption(self, name: str, default: object = None) -> object:
        return self.markexpr if name == "markexpr" else default


@pytest.mark.parametrize(("markexpr", "filters"), [
    ("groundtruth or postgres", True), ("postgres", True), ("groundtruth", True), ("(postgres or groundtruth)", True),
    ("", False), ("not postgres", False), ("postgres and slow", False), ("postgres or slow", False), ("or", False),
])
def test_the_passes_import_only_modules_that_name_a_pass(tmp_path: Path, markexpr: str, filters: bool) -> None:
    """Under `-m` of the passes' markers only, a test module whose source names neither marker is not collected
    (none of its tests could be selected); one that names either is, and so is every module under any other -m."""
    from tests.conftest import pytest_ignore_collect

    plain, marked, helper = tmp_path / "test_plain.py", tmp_path / "test_marked.py", tmp_path / "helpers.py"
    plain.write_text("def test_x():\n    pass\n")
    marked.write_text("import pytest\npytestmark = pytest.mark.postgres\n")
    helper.write_text("VALUE = 1\n")
    config = _Config(markexpr)
    assert pytest_ignore_collect(plain, config) is (True if filters else None)
    assert pytest_ignore_collect(marked, config) is None and pytest_ignore_collect(helper, config) is None


def test_only_a_tests_own_module_gives_it_a_passs_marker() -> None:
    """What the filter above rests on: no conftest adds markers, and no test module takes tests from another."""
    for conftest in ROOT.joinpath("tests").rglob("conftest.py"):
        assert "add_marker" not in conftest.read_text(), conftest
    for module in ROOT.joinpath("tests").rglob("test_*.py"):
        assert not re.search(r"^\s*from \S+ import (\(?\s*test_|.*[ ,]test_\w+|\*)", module.read_text(), re.M), module
