"""The PostgreSQL pass (`-m postgres`, .ci/run) fails rather than skips, or quietly tests SQLite again, when it
has no server to run on."""

from __future__ import annotations

import os
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
