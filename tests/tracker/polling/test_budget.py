"""The Hub request budget (tracker/polling/budget.py): windows, the Hub's RateLimit headers, stretching, and the
hooks on the real huggingface_hub client against the replay server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from structlog.testing import capture_logs

from tracker.config import settings_from_mapping
from tracker.errors import ConfigError
from tracker.hub.client import HubClient, install_budget, ratelimit_of, remove_budget
from tracker.polling.budget import RequestBudget, budget_state, pool_of, set_process_budget
from tracker.standins.replay.control import ReplayServer
from tracker.standins.replay.history import synthetic_history

pytestmark = pytest.mark.postgres  # its database tests run on PostgreSQL too (.ci/run)


class FakeTime:
    """A monotonic clock that only `sleep` moves."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_a_spent_window_waits_for_the_next() -> None:
    """The fourth request of a 3-a-window budget waits until the window turns, then goes."""
    time = FakeTime()
    budget = RequestBudget(3, 10, clock=time, sleep=time.sleep)
    waits = [budget.acquire("api") for _ in range(4)]
    assert waits == [0.0, 0.0, 0.0, 300.0] and time.slept == [300.0]
    assert budget.state()["pools"]["api"]["used"] == 1


def test_pools_are_separate_and_zero_is_no_budget() -> None:
    """Resolves do not draw on the API pool; a pool of 0 never waits."""
    time = FakeTime()
    budget = RequestBudget(1, 0, clock=time, sleep=time.sleep)
    budget.acquire("api")
    for _ in range(50):
        assert budget.acquire("resolvers") == 0.0
    assert time.slept == []
    assert budget.state()["pools"]["resolvers"]["limit_per_window"] is None


def test_hub_ratelimit_header_takes_precedence() -> None:
    """`RateLimit: "api";r=0;t=42` makes the next request wait 42 s although our own count had room."""
    time = FakeTime()
    budget = RequestBudget(1000, 0, clock=time, sleep=time.sleep)
    budget.acquire("api")
    budget.observe("api", ratelimit_of({"RateLimit": '"api";r=0;t=42', "RateLimit-Policy": '"fixed window";"api";q=500;w=300'}))
    state = budget.state()["pools"]["api"]
    assert (state["source"], state["limit_per_window"], state["remaining"]) == ("hub", 500, 0)
    assert budget.acquire("api") == 42.0
    assert budget.state()["pools"]["api"]["source"] == "settings"  # a new window: our own limit again


def test_hub_header_without_a_budget_of_ours_still_holds_back() -> None:
    """With the budget off (0), a Hub that says nothing remains is still listened to."""
    time = FakeTime()
    budget = RequestBudget(0, 0, clock=time, sleep=time.sleep)
    budget.observe("api", ratelimit_of({"RateLimit": '"api";r=0;t=7'}))
    assert budget.acquire("api") == 7.0
    assert budget.acquire("api") == 0.0  # the window turned: no budget again


def test_headers_without_ratelimit_change_nothing() -> None:
    """An answer with no RateLimit header leaves the count as it is."""
    budget = RequestBudget(5, 0)
    budget.acquire("api")
    budget.observe("api", ratelimit_of({"Content-Type": "application/json"}))
    assert budget.state()["pools"]["api"]["used"] == 1


def test_stretch_factor_is_logged_once_per_change() -> None:
    """Needing more than 90% of the budget stretches every interval; the logs say so once, and again when it fits."""
    budget = RequestBudget(100, 0)
    with capture_logs() as logs:
        assert budget.stretch_factor(45) == 1.0
        assert budget.stretch_factor(180) == pytest.approx(2.0)
        assert budget.stretch_factor(180) == pytest.approx(2.0)
        assert budget.stretch_factor(10) == 1.0
    assert [e["event"] for e in logs] == ["hub_budget_stretched", "hub_budget_fits"]
    assert logs[0]["factor"] == 2.0 and logs[0]["budget_per_5min"] == 100


def test_negative_budget_is_refused() -> None:
    """A negative budget is an error, in the constructor and in the settings."""
    with pytest.raises(ValueError, match="cannot be negative"):
        RequestBudget(-1, 0)
    with pytest.raises(ConfigError, match="api_requests_per_5min"):
        settings_from_mapping({"hub": {"api_requests_per_5min": -5}}, env={})


def test_settings_defaults_are_the_free_account_figures() -> None:
    """Defaults: 1,000 API calls and 5,000 resolves per 5 minutes; the environment overrides them."""
    settings = settings_from_mapping({}, env={"HUBWATCH_HUB_API_REQUESTS_PER_5MIN": "0"})
    assert (settings.hub.api_requests_per_5min, settings.hub.resolve_requests_per_5min) == (0, 5000)
    assert settings_from_mapping({}, env={}).hub.api_requests_per_5min == 1000


@pytest.mark.parametrize(("path", "pool"), [("/api/models/a/b", "api"), ("/a/b/resolve/main/config.json", "resolvers")])
def test_pool_of(path: str, pool: str) -> None:
    """Resolves count against the resolvers pool, everything else against the API pool."""
    assert pool_of(path) == pool


@pytest.fixture
def hub() -> Iterator[ReplayServer]:
    with ReplayServer(roots=[]) as server:
        server.add_repo(synthetic_history("acme/a", commits=1))
        yield server


@pytest.fixture
def installed() -> Iterator[None]:
    yield
    remove_budget()
    set_process_budget(None)


def test_installed_budget_holds_back_the_real_client(hub: ReplayServer, installed: None) -> None:
    """Installed on the library's client, a budget of 2 makes the third request wait, shared by two clients."""
    time = FakeTime()
    budget = RequestBudget(2, 0, clock=time, sleep=time.sleep)
    install_budget(budget, hub.endpoint)
    set_process_budget(budget)
    HubClient(hub.endpoint).head("acme/a", "main")
    HubClient(hub.endpoint).head("acme/a", "main")
    assert time.slept == []
    HubClient(hub.endpoint).head("acme/a", "main")
    assert time.slept == [300.0] and hub.count_requests() == 3
    assert budget_state()["pools"]["api"]["waits"] == 1


def test_installed_budget_reads_the_hubs_headers(hub: ReplayServer, installed: None) -> None:
    """The Hub's RateLimit headers on ordinary answers replace our count."""
    time = FakeTime()
    budget = RequestBudget(1000, 0, clock=time, sleep=time.sleep)
    install_budget(budget, hub.endpoint)
    hub.send_ratelimit(remaining=3, reset_s=120, limit=500)
    HubClient(hub.endpoint).head("acme/a", "main")
    state = budget.state()["pools"]["api"]
    assert (state["source"], state["limit_per_window"], state["remaining"], state["resets_in_s"]) == ("hub", 500, 3, 120.0)


def test_removed_budget_no_longer_counts(hub: ReplayServer) -> None:
    """After remove_budget the library's requests are not counted."""
    budget = RequestBudget(5, 0)
    install_budget(budget, hub.endpoint)
    remove_budget()
    HubClient(hub.endpoint).head("acme/a", "main")
    assert budget.state()["pools"]["api"]["used"] == 0


def test_budget_state_is_none_without_a_budget() -> None:
    """No budget installed: /healthz has nothing to show."""
    set_process_budget(None)
    assert budget_state() is None



@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"RateLimit": '"api";r=12;t=30'}, (12, 30.0, None, None)),
        ({"ratelimit": '"resolvers";r=0;t=5', "ratelimit-policy": '"fixed window";"resolvers";q=3000;w=300'}, (0, 5.0, 3000, 300)),
        ({"RateLimit": "garbage"}, None),
        ({}, None),
    ],
)
def test_ratelimit_of(headers: dict, expected: tuple | None) -> None:
    """RateLimit headers are read case-insensitively with their policy; malformed or absent ones say nothing."""
    word = ratelimit_of(headers)
    assert (None if word is None else (word.remaining, word.reset_s, word.limit, word.window_s)) == expected


# -- one budget for every process on a database ------------------------------------------------------


@pytest.fixture
def engines(database_url: str) -> Iterator[list]:
    """Two engines on one database: two processes."""
    from storage.db import create_db_engine, migrate

    made = [create_db_engine(database_url) for _ in range(2)]
    migrate(made[0])
    yield made
    for engine in made:
        engine.dispose()


def _wall(fake: FakeTime):
    from datetime import UTC, datetime, timedelta

    return lambda: datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=fake.now)


def test_claims_never_exceed_the_limit(engines: list) -> None:
    """Blocks are granted while they fit, then single requests, then nothing until the window turns."""
    from storage.budget import BudgetStore

    fake = FakeTime()
    a, b = (BudgetStore(engine, clock=_wall(fake)) for engine in engines)
    assert a.claim("api", 3, 5, 300) == (3, 300)
    assert b.claim("api", 3, 5, 300) == (1, 300.0)
    assert b.claim("api", 3, 5, 300) == (1, 300.0)
    assert a.claim("api", 3, 5, 300) == (0, 300.0)
    assert a.claim("resolvers", 3, 5, 300) == (3, 300)  # another pool, another window
    fake.now += 300
    assert b.claim("api", 3, 5, 300) == (3, 300)


def test_two_processes_share_one_budget(engines: list) -> None:
    """Two budgets on one database: together they take 4 requests of a 4-a-window budget, then both wait."""
    from storage.budget import BudgetStore

    fake = FakeTime()
    budgets = [RequestBudget(4, 0, clock=fake, sleep=fake.sleep, shared=BudgetStore(e, clock=_wall(fake)).claim) for e in engines]
    assert [budgets[i % 2].acquire("api") for i in range(4)] == [0.0] * 4
    assert budgets[0].acquire("api") == pytest.approx(300.0)
    assert budgets[1].state()["pools"]["api"]["remaining"] is not None


def test_a_failing_shared_budget_counts_locally() -> None:
    """When the database cannot be asked, the process counts on its own (logged once) and goes on."""

    def broken(pool: str, wanted: int, limit: int, window_s: float) -> tuple[int, float]:
        raise OSError("database is locked")

    fake = FakeTime()
    budget = RequestBudget(2, 0, clock=fake, sleep=fake.sleep, shared=broken)
    with capture_logs() as logs:
        waits = [budget.acquire("api") for _ in range(3)]
    assert waits == [0.0, 0.0, 300.0]
    assert [e["event"] for e in logs].count("hub_budget_shared_failed") == 1
