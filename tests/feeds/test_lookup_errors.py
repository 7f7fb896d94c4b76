"""Storage lookup errors over HTTP: one table of statuses, `{"detail": ...}` on the API, the error page on pages."""

from __future__ import annotations

import html
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa
from structlog.testing import capture_logs

from feeds.http.app import LOOKUP_STATUS, lookup_status
from storage import errors
from tests.support.served import LLAMA, History, serve

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


def test_a_table_dropped_by_hand_answers_503_naming_it(history: History, tmp_path: Path,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    """On a copy whose `revision` table was dropped by hand, the API answers 503 with a JSON `detail` naming
    the table and pages the error page saying it; one log line a request, and no traceback anywhere."""
    copy = history.copy_to(tmp_path)
    engine = sa.create_engine(copy.url)
    cascade = " CASCADE" if engine.dialect.name == "postgresql" else ""
    with engine.begin() as conn:
        conn.exec_driver_sql(f"DROP TABLE revision{cascade}")
    engine.dispose()
    missing = "is missing table 'revision': restore it from a backup"
    with capture_logs() as logs, serve(copy.store()) as server, server.client() as client:
        answer = client.get(f"/api/v1/repos/{LLAMA}/revisions")
        page = client.get(f"/repos/{LLAMA}")
    assert answer.status_code == 503 and answer.headers["content-type"] == "application/json"
    assert missing in answer.json()["detail"]
    assert page.status_code == 503 and page.headers["content-type"].startswith("text/html")
    assert "<h1>503</h1>" in page.text and missing in html.unescape(page.text)
    failed = [entry for entry in logs if entry["event"] == "http_storage_failed"]
    assert [entry["path"] for entry in failed] == [f"/api/v1/repos/{LLAMA}/revisions", f"/repos/{LLAMA}"]
    assert all(missing in entry["error"] for entry in failed)
    assert not [entry for entry in logs if "exc_info" in entry]
    assert not [record for record in caplog.records if record.exc_info]
