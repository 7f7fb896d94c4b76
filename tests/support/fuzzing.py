"""The HTTP server fuzzed from its own OpenAPI document: schemathesis's engine (the `st run` phases:
examples, coverage with undeclared methods, fuzzing, stateful links) against a served history, its path
parameters drawn often from the history's real repo ids and commit shas, so that the operations that
would answer 404 to random names reach their logic. Shared by tests/feeds/test_openapi.py (a fixed seed,
a few seconds) and benchmarks/bench_fuzz_api.py (longer: `python -m benchmarks run fuzz_api`)."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import schemathesis
from schemathesis.config import SchemathesisConfig
from schemathesis.engine import Status, events

from storage.front import Storage

# Operations whose 2xx depends on more than the document can say: a subscription URL's host must resolve to a
# public address (a schema-valid URL may be refused), so "accepts valid data" cannot be asked of it.
NOT_SCHEMA_DECIDED = {"POST /api/v1/subscriptions": ["positive_data_acceptance"]}


@dataclass
class FuzzReport:
    """What a run sent and met: requests by status class, the failed checks, errors the engine hit."""

    requests: int = 0
    statuses: Counter[int] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    operations: set[str] = field(default_factory=set)
    by_operation: Counter[tuple[str, int]] = field(default_factory=Counter)  # (operation label, status) -> answers

    @property
    def server_errors(self) -> int:
        return sum(n for status, n in self.statuses.items() if status >= 500)

    def repo_scoped_ok(self) -> set[str]:
        """The repo-scoped operations (`{org}/{name}` in the path) that answered 2xx at least once."""
        return {label for (label, status), _ in self.by_operation.items() if "{org}/{name}" in label and 200 <= status < 300}


def history_values(store: Storage) -> dict[str, list[str]]:
    """The orgs, names and commit shas (full and 12-hex prefixes) of a stored history, for the fuzzer's dictionaries."""
    repos = [r.repo_id for r in store.read_model.repos()]
    shas = [r.sha for repo_id in repos for r in store.history.list_revisions(repo_id, limit=100, offset=0)]
    return {"orgs": sorted({r.split("/")[0] for r in repos}), "names": sorted({r.split("/")[1] for r in repos}),
            "shas": shas + [s[:12] for s in shas]}


def load_engine(url: str) -> None:
    """What a first run pays once a process, paid now: the OpenAPI half of schemathesis, which it imports on its
    first load of a document (1.5-3 s), and the server's document, which FastAPI builds on its first request."""
    import schemathesis.specs.openapi.schemas  # noqa: F401

    httpx.get(f"{url}/api/v1/openapi.json", timeout=30).raise_for_status()


def fuzz(url: str, values: dict[str, list[str]], *, headers: dict[str, str], seed: int, max_time_s: int,
         max_examples: int, workers: int = 1, phases: tuple[str, ...] = ("examples", "coverage", "fuzzing", "stateful"),
         into: FuzzReport | None = None, until: Callable[[FuzzReport], bool] | None = None) -> FuzzReport:
    """Run `phases` against the server at `url` until done, `max_time_s`, or `until(report)` holds after a
    scenario; `headers` go on every request (the write token: reads take it or ignore it). Counts go `into` a
    report given (runs add up)."""
    sha = {"dictionary": "shas", "probability": 0.7}
    config = SchemathesisConfig.from_dict({
        "seed": seed,
        "cache": {"enabled": False},  # no .schemathesis/ left in the checkout
        "max-time": max_time_s,
        "workers": workers,
        "headers": headers,
        "generation": {"max-examples": max_examples},
        "phases": {name: {"enabled": name in phases} for name in ("examples", "coverage", "fuzzing", "stateful")},
        "dictionaries": {name: {"values": vals} for name, vals in values.items()},
        "parameters": {"path.org": {"dictionary": "orgs", "probability": 0.8},
                       "path.name": {"dictionary": "names", "probability": 0.8},
                       "path.sha": sha, "query.from": sha, "query.to": sha},
        "operations": [{"include-method": label.split()[0], "include-path": label.split()[1],
                        "checks": {name: {"enabled": False} for name in checks}}
                       for label, checks in NOT_SCHEMA_DECIDED.items()],
    })
    schema = schemathesis.openapi.from_url(f"{url}/api/v1/openapi.json", config=config)
    report = into or FuzzReport()
    for event in schemathesis.engine.from_schema(schema).execute():
        if isinstance(event, events.ScenarioFinished | events.FuzzScenarioFinished):
            _record(report, event.recorder)
            if until is not None and until(report):
                break
        elif isinstance(event, events.NonFatalError):
            report.errors.append(f"{event.label}: {event.value!r}")
        elif isinstance(event, events.FatalError):
            report.errors.append(repr(event.exception))
    return report


def _record(report: FuzzReport, recorder: Any) -> None:
    report.operations.add(recorder.label)
    for interaction in recorder.interactions.values():
        report.requests += 1
        if interaction.response is not None:
            report.statuses[interaction.response.status_code] += 1
            report.by_operation[recorder.label, interaction.response.status_code] += 1
    for nodes in recorder.checks.values():
        for node in nodes:
            if node.status == Status.FAILURE and node.failure_info is not None:
                failure = node.failure_info.failure
                said = " ".join(line for line in (failure.title, *failure.message.splitlines()[:2]) if line)
                report.failures.append(f"{recorder.label} [{node.name}] {said}")


class TracebackCounter(logging.Handler):
    """Counts log records that carry a traceback (uvicorn's and the app's `log.exception`)."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0
        self.first: str | None = None

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info:
            self.count += 1
            self.first = self.first or self.format(record)
