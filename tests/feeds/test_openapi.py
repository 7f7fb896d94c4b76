"""The OpenAPI document against the running server: schemathesis's engine fuzzes every operation from the
document (its examples, undeclared methods, generated and negative data, links between operations) and
checks each answer's status, content type, headers, body and authentication against it, under the default
configuration (reads open, no Hub webhook secret) and a private one. A fixed seed and a time budget keep
each run to a few seconds; benchmarks/bench_fuzz_api.py runs the same for longer."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import httpx
import pytest

from tests.support.fuzzing import FuzzReport, TracebackCounter, fuzz, history_values, load_engine
from tests.support.served import API_TOKEN, READ_TOKEN, History, Served, serve

pytestmark = pytest.mark.postgres  # its database tests run on PostgreSQL too (.ci/run)

AUTH = {"Authorization": f"Bearer {API_TOKEN}"}
SEED = 20261204
MAX_EXAMPLES = 5
# Each phase its own budget (schemathesis's max-time, whole seconds; a run stops where it is then): the coverage
# phase (boundary values, undeclared methods) would otherwise spend the whole budget before fuzzing starts.
BUDGETS_S = {"coverage": 4, "fuzzing": 3}  # coverage builds its first cases before a request (0 in 2 s on a loaded CI run)
REACH_BUDGET_S = 30  # bounds a run that never reaches a stored repo; a passing one stops far sooner


@pytest.fixture(scope="module")
def open_server(history: History, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """The default configuration (reads open, no Hub webhook secret), writes allowed, over a writable copy."""
    copy = history.copy_to(tmp_path_factory.mktemp("openapi-open"))
    with serve(copy.store(), api_token=API_TOKEN, trigger=lambda *_: True, allow_private_targets=True) as served:
        load_engine(served.url)
        yield served


@pytest.fixture(scope="module")
def private_server(history: History, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """A private server (reads need a token too, so auth is exercised everywhere) over a writable copy."""
    copy = history.copy_to(tmp_path_factory.mktemp("openapi-private"))
    with serve(copy.store(), api_token=API_TOKEN, read_token=READ_TOKEN, hub_webhook_secret="s3cret",
               trigger=lambda *_: True, allow_private_targets=True) as served:
        load_engine(served.url)
        yield served


def _fuzzed(served: Served, phase: str) -> tuple[FuzzReport, TracebackCounter]:
    tracebacks = TracebackCounter()
    logging.getLogger().addHandler(tracebacks)
    try:
        report = fuzz(served.url, history_values(served.store), headers=AUTH, seed=SEED, max_time_s=BUDGETS_S[phase],
                      max_examples=MAX_EXAMPLES, phases=(phase,))
    finally:
        logging.getLogger().removeHandler(tracebacks)
    return report, tracebacks


@pytest.fixture(params=["open_server", "private_server"])
def server(request: pytest.FixtureRequest) -> Served:
    """Each configuration's server, resolved at set-up: the session's history ingested (once a worker) and the fuzzer's
    engine loaded (once a module, `load_engine`) before the test's clock starts, not inside the first fuzz."""
    return request.getfixturevalue(request.param)


# One test a server and phase, each phase its own budget: one test ran both phases (and, the first on a worker,
# the session's ingest of the history), over 10 s on a quiet 2-core machine.
@pytest.mark.parametrize("phase", list(BUDGETS_S))
def test_fuzzed_server_does_what_its_openapi_document_says(server: Served, phase: str) -> None:
    """Fuzzed from its document (fixed seed, a few seconds a phase), the server fails no check, never answers 5xx
    and logs no traceback."""
    report, tracebacks = _fuzzed(server, phase)
    assert report.failures == [] and report.errors == []
    assert report.server_errors == 0 and tracebacks.count == 0, tracebacks.first
    # A time budget: how many requests fit depends on the machine (one on a loaded CI run, where the worker's first
    # fuzz also pays schemathesis's start-up); that the server was reached is asserted, the reach test below asks
    # for the operations' logic, and the fuzz_api benchmark fuzzes for minutes.
    assert report.requests >= 1, dict(report.statuses)


def test_fuzzer_reaches_the_logic_of_repo_scoped_operations(open_server: Served) -> None:
    """The fuzzer's path parameters come from the stored history, so a repo-scoped operation answers 2xx, not
    only 404 (the run stops at the first; its budget bounds a run that never gets there)."""
    report = fuzz(open_server.url, history_values(open_server.store), headers=AUTH, seed=SEED, max_time_s=REACH_BUDGET_S,
                  max_examples=MAX_EXAMPLES, phases=("fuzzing",), until=lambda r: bool(r.repo_scoped_ok()))
    assert report.repo_scoped_ok(), sorted(report.by_operation.items())
    assert report.failures == [] and report.server_errors == 0


def test_document_covers_every_route(private_server: Served) -> None:
    """The document lists the API, feeds, Hub webhook and health routes, with bearer auth declared."""
    document = httpx.get(f"{private_server.url}/api/v1/openapi.json").json()
    paths = set(document["paths"])
    assert {"/api/v1/watches", "/api/v1/events", "/api/v1/repos/{org}/{name}/revisions/{sha}", "/api/v1/repos/{org}/{name}/diff",
            "/api/v1/subscriptions", "/repos/{org}/{name}/feed.atom", "/feeds/security.rss", "/hooks/hub", "/readyz",
            "/metrics"} <= paths
    assert "HTTPBearer" in document["components"]["securitySchemes"]
    assert not any(p.startswith("/repos/{org}/{name}/compare") for p in paths)  # pages are HTML, left out


@pytest.mark.parametrize(("server", "read_security", "read_401"), [
    ("open_server", [], False),
    ("private_server", [{"HTTPBearer": []}, {"APIKeyQuery": []}], True),
])
def test_document_declares_security_as_configured(server: str, read_security: list, read_401: bool,
                                                  request: pytest.FixtureRequest) -> None:
    """Reads declare the read token (and a 401) only when one is set; writes always declare the bearer token."""
    document = httpx.get(f"{request.getfixturevalue(server).url}/api/v1/openapi.json").json()
    for path, method in [("/api/v1/events", "get"), ("/api/v1/repos/{org}/{name}/revisions", "get"),
                         ("/feeds/all.atom", "get"), ("/metrics", "get")]:
        operation = document["paths"][path][method]
        assert operation["security"] == read_security and ("401" in operation["responses"]) is read_401, path
    for path, method in [("/api/v1/watches", "post"), ("/api/v1/subscriptions/{subscription_id}", "delete")]:
        assert document["paths"][path][method]["security"] == [{"HTTPBearer": []}]
    assert ("APIKeyQuery" in document["components"]["securitySchemes"]) is read_401


@pytest.mark.parametrize(("method", "path", "allow"), [
    ("OPTIONS", "/api/v1/watches", "GET, POST"),
    ("PUT", "/api/v1/subscriptions", "GET, POST"),
    ("OPTIONS", "/api/v1/events", "GET"),
    ("PATCH", "/api/v1/watches/meta-llama/Llama-3.1-8B-Instruct", "DELETE"),
])
def test_405_allows_every_method_the_path_serves(open_server: Served, method: str, path: str, allow: str) -> None:
    """A method a path does not serve answers 405 with `Allow` naming every method served there, not one route's."""
    response = httpx.request(method, f"{open_server.url}{path}")
    assert response.status_code == 405 and response.headers["allow"] == allow
