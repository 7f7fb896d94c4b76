"""The OpenAPI document against the running server: schemathesis generates requests for every
operation and checks each answer's status, content type, headers and body against the document."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import checks

from tests.support.served import API_TOKEN, READ_TOKEN, History, serve

pytestmark = pytest.mark.postgres  # its database tests run on PostgreSQL too (.ci/run)

AUTH = {"Authorization": f"Bearer {API_TOKEN}"}


@pytest.fixture(scope="module")
def running(history: History, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A private server (reads need a token too, so auth is exercised everywhere) over a writable copy."""
    copy = history.copy_to(tmp_path_factory.mktemp("openapi"))
    with serve(copy.store(), api_token=API_TOKEN, read_token=READ_TOKEN, hub_webhook_secret="s3cret",
               trigger=lambda *_: True, allow_private_targets=True) as served:
        yield served.url


def test_server_does_what_its_openapi_document_says(running: str) -> None:
    """Generated requests for every operation get answers the document describes (status, media type, schema), never a 5xx."""
    schema = schemathesis.openapi.from_url(f"{running}/api/v1/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) > 20

    for operation in operations:
        _property_test(operation)()


def _property_test(operation):
    # Whether a URL's host resolves to a public address is no JSON Schema: a schema-valid URL may be refused.
    excluded = [checks.positive_data_acceptance] if operation.label == "POST /api/v1/subscriptions" else []

    @given(case=operation.as_strategy())
    @settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True, database=None)
    def check(case: schemathesis.Case) -> None:
        case.call_and_validate(headers=AUTH, excluded_checks=excluded)

    return check


def test_document_covers_every_route(running: str) -> None:
    """The document lists the API, feeds, Hub webhook and health routes, with bearer auth declared."""
    document = httpx.get(f"{running}/api/v1/openapi.json").json()
    paths = set(document["paths"])
    assert {"/api/v1/watches", "/api/v1/events", "/api/v1/repos/{org}/{name}/revisions/{sha}", "/api/v1/repos/{org}/{name}/diff",
            "/api/v1/subscriptions", "/repos/{org}/{name}/feed.atom", "/feeds/security.rss", "/hooks/hub", "/readyz",
            "/metrics"} <= paths
    assert "HTTPBearer" in document["components"]["securitySchemes"]
    assert not any(p.startswith("/repos/{org}/{name}/compare") for p in paths)  # pages are HTML, left out
