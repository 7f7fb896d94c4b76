"""Storage lookup errors over HTTP: one table of statuses, `{"detail": ...}` on the API, the error page on pages."""

from __future__ import annotations

import httpx
import pytest

from feeds.http.app import LOOKUP_STATUS, lookup_status
from storage import errors
from tests.support.served import LLAMA

pytestmark = pytest.mark.postgres  # its database tests run on PostgreSQL too (.ci/run)


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (errors.NotStored, 404),
        (errors.RevisionNotStored, 404),
        (errors.DeliveryNotFound, 404),
        (errors.AmbiguousRevision, 409),
        (errors.WatchExists, 409),
        (errors.SubscriptionDisabled, 409),
    ],
)
def test_each_lookup_error_has_its_status(error: type[errors.StoreLookupError], status: int) -> None:
    """A lookup error answers with its own class's status, or with its nearest listed base's."""
    assert lookup_status(error("what was asked")) == status


def test_every_lookup_error_class_is_mapped() -> None:
    """Every StoreLookupError subclass storage defines has a status, so none becomes a 500."""
    found, pending = set(), [errors.StoreLookupError]
    while pending:
        for sub in pending.pop().__subclasses__():
            found.add(sub)
            pending.append(sub)
    assert found and all(any(cls in LOOKUP_STATUS for cls in sub.__mro__) for sub in found)


def test_api_answers_an_unknown_revision_in_json(client: httpx.Client) -> None:
    """The API answers as an HTTPException does: the status and the store's sentence as `detail`."""
    for path in (f"/api/v1/repos/{LLAMA}/revisions/deadbeef", f"/api/v1/repos/{LLAMA}/diff?from=deadbeef&to=cafebabe"):
        response = client.get(path)
        assert response.status_code == 404 and response.headers["content-type"] == "application/json"
        assert response.json() == {"detail": f"no stored revision of {LLAMA} matches deadbeef"}


def test_pages_answer_an_unknown_revision_with_the_error_page(client: httpx.Client) -> None:
    """A page answers with the HTML error page (and its Content-Security-Policy), never JSON."""
    for path in (f"/repos/{LLAMA}/revisions/deadbeef", f"/repos/{LLAMA}/compare/deadbeef...cafebabe"):
        page = client.get(path)
        assert page.status_code == 404 and page.headers["content-type"].startswith("text/html")
        assert "default-src 'none'" in page.headers["content-security-policy"]
        assert "<h1>404</h1>" in page.text and f"no stored revision of {LLAMA} matches deadbeef" in page.text
