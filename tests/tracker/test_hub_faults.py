"""Hub faults the daemon absorbs: an unreachable Hub, a silent one, dropped connections and repeated 429s.

Each fault is real: a closed port, an unresolvable host, a replay server that answers nothing or 429.
"""

from __future__ import annotations

import socket
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.support.cli import run_cli, write_config
from tests.support.settings import settings_for
from tracker.cli.app import App

BROKEN = "hubwatch-tests/broken-model"
EVERY_KIND = "hubwatch-tests/every-kind"
REWRITTEN = "hubwatch-tests/rewritten-model"


def _closed_port_endpoint() -> str:
    """An address nobody listens on: a port bound, then closed (connection refused)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return f"http://127.0.0.1:{port}"


UNREACHABLE = {
    "connection refused": _closed_port_endpoint,
    "unresolvable host": lambda: "http://hub.hubwatch-tests.invalid",
}


class FakeClock:
    def __init__(self) -> None:
        self.now = datetime(2025, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


def _no_traceback(stderr: str) -> None:
    assert "Traceback" not in stderr, stderr


@pytest.mark.parametrize("fault", sorted(UNREACHABLE))
def test_poll_of_several_repos_against_an_unreachable_hub(fault: str, tmp_path: Path, database_url: str) -> None:
    """`hubwatch poll` with the Hub unreachable: exit 1, no traceback, the failure and a retry time on every watch."""
    config = write_config(tmp_path / "hubwatch.toml", UNREACHABLE[fault](), database_url)
    for repo in (BROKEN, EVERY_KIND):
        added = run_cli("watch", "add", repo, "--no-check", config=config)
        assert added.returncode == 0, added.stderr
    result = run_cli("poll", config=config)
    assert result.returncode == 1
    _no_traceback(result.stderr)
    app = App(settings_for("http://unused.invalid", database_url))  # type: ignore[arg-type]
    watches = app.store.watches.list_watches()
    assert len(watches) == 2
    for watch in watches:
        assert watch.last_error and "cannot reach the Hub" in watch.last_error, watch.last_error
        assert watch.error_count == 1 and watch.next_retry_at is not None
    app.store.engine.dispose()


@pytest.mark.parametrize("fault", sorted(UNREACHABLE))
def test_watch_add_against_an_unreachable_hub(fault: str, tmp_path: Path, database_url: str) -> None:
    """`hubwatch watch add` with the Hub unreachable says so in one line and exits 1, without a traceback."""
    config = write_config(tmp_path / "hubwatch.toml", UNREACHABLE[fault](), database_url)
    result = run_cli("watch", "add", BROKEN, config=config)
    assert result.returncode == 1
    _no_traceback(result.stderr)
    assert result.stderr.strip().startswith("error: ") and "cannot reach the Hub" in result.stderr


def test_one_unreachable_repo_does_not_stop_a_poll_of_several(replay, tmp_path: Path, database_url: str) -> None:
    """A repo whose connection is dropped fails alone: the other repos of the same `hubwatch poll` are ingested."""
    config = write_config(tmp_path / "hubwatch.toml", replay.endpoint, database_url)
    for repo in (BROKEN, EVERY_KIND, REWRITTEN):
        replay.set_head(repo, 1)
        assert run_cli("watch", "add", repo, "--no-check", config=config).returncode == 0
    replay.inject_silence(path=f"^/api/models/{EVERY_KIND}", times=1000)
    result = run_cli("poll", config=config)
    assert result.returncode == 1
    _no_traceback(result.stderr)
    app = App(settings_for(replay.endpoint, database_url))  # type: ignore[arg-type]
    assert [r.sha for r in app.store.history.list_revisions(BROKEN)] == [replay.head_sha(BROKEN)]
    assert [r.sha for r in app.store.history.list_revisions(REWRITTEN)] == [replay.head_sha(REWRITTEN)]
    failed = app.store.watches.get_watch(EVERY_KIND)
    assert "cannot reach the Hub" in failed.last_error and failed.next_retry_at is not None
    assert app.store.history.list_revisions(EVERY_KIND) == []
    app.store.engine.dispose()


def test_a_hub_that_never_answers_times_out_and_is_recorded(replay, tmp_path: Path) -> None:
    """A Hub that accepts and never answers fails the poll after [hub] timeout_s, recorded with a retry time."""
    app = App(settings_for(replay.endpoint, tmp_path / "db.sqlite", hub={"timeout_s": 0.3}))  # type: ignore[arg-type]
    replay.set_head(BROKEN, 1)
    app.store.watches.add_watch(BROKEN, "main", 900)
    replay.inject_silence(path=f"^/api/models/{BROKEN}", after_s=3)
    [outcome] = app.poller.poll()
    assert outcome.failed and "did not answer in time" in outcome.error, outcome.error
    watch = app.store.watches.get_watch(BROKEN)
    assert watch.error_count == 1 and watch.next_retry_at is not None
    app.store.engine.dispose()


def test_repeated_rate_limits_back_off_exponentially(replay, tmp_path: Path) -> None:
    """Each 429 in a row doubles the wait, never below what the Hub's RateLimit header says; success resets it."""
    clock = FakeClock()
    app = App(settings_for(replay.endpoint, tmp_path / "db.sqlite", poll={"retry_min": "10s"}), clock=clock)  # type: ignore[arg-type]
    replay.set_head(BROKEN, 1)
    app.store.watches.add_watch(BROKEN, "main", 900)
    replay.inject(429, path=f"^/api/models/{BROKEN}(/revision/[^/]+)?$", method="GET", times=1000,
                  headers={"RateLimit": '"api";r=0;t=29'})
    waits = []
    for _ in range(4):
        outcome = app.poller.poll_if_due(BROKEN, "main")
        assert outcome is not None and outcome.failed and "rate limited" in outcome.error
        assert app.poller.poll_if_due(BROKEN, "main") is None  # backing off: no request
        watch = app.store.watches.get_watch(BROKEN)
        waits.append((watch.next_retry_at - clock.now).total_seconds())
        clock.now = watch.next_retry_at
    assert waits == [30.0, 60.0, 120.0, 240.0]  # the header's t=29 means 30 s; then doubling
    replay.clear_faults()
    outcome = app.poller.poll_if_due(BROKEN, "main")
    assert outcome is not None and outcome.status == "ingested"
    watch = app.store.watches.get_watch(BROKEN)
    assert watch.error_count == 0 and watch.next_retry_at is None
    app.store.engine.dispose()


def test_rate_limit_header_longer_than_the_back_off_wins(replay, tmp_path: Path) -> None:
    """A 429 that asks for longer than the exponential back-off is honoured in full."""
    clock = FakeClock()
    app = App(settings_for(replay.endpoint, tmp_path / "db.sqlite", poll={"retry_min": "1m"}), clock=clock)  # type: ignore[arg-type]
    replay.set_head(BROKEN, 1)
    app.store.watches.add_watch(BROKEN, "main", 900)
    replay.inject(429, path=f"^/api/models/{BROKEN}(/revision/[^/]+)?$", method="GET", headers={"RateLimit": '"api";r=0;t=3599'})
    app.poller.poll_if_due(BROKEN, "main")
    watch = app.store.watches.get_watch(BROKEN)
    assert watch.next_retry_at - clock.now == timedelta(hours=1)
    app.store.engine.dispose()
