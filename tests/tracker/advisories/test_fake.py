"""The OSV fake answers as api.osv.dev does, over real HTTP (so the client tests mean something)."""

from __future__ import annotations

import httpx
import pytest

from tracker.standins.osv import OsvFake, bundled_records


@pytest.fixture
def http(fake: OsvFake):
    with httpx.Client(base_url=fake.endpoint) as client:
        yield client


def test_bundle_is_served(http, records):
    """Every bundled record is served by id, byte-for-byte the same JSON."""
    assert len(records) >= 20, "the OSV fake's bundle of real records is (nearly) empty"
    for vuln_id, record in records.items():
        assert http.get(f"/v1/vulns/{vuln_id}").json() == record


def test_unknown_id_is_404(http):
    """An id OSV does not know answers 404 with OSV's message."""
    response = http.get("/v1/vulns/GHSA-0000-0000-0000")
    assert response.status_code == 404 and response.json()["message"] == "Bug not found."


def test_querybatch_answers_in_order_with_empty_objects(http):
    """Results come in query order; a query with no vulnerability is `{}`, as OSV answers it."""
    body = {"queries": [{"package": {"name": "transformers", "ecosystem": "PyPI"}, "version": "99.0"},
                        {"package": {"name": "torch", "ecosystem": "PyPI"}, "version": "2.9.1"},
                        {"package": {"name": "left-pad", "ecosystem": "npm"}, "version": "1.0.0"}]}
    results = http.post("/v1/querybatch", json=body).json()["results"]
    assert results[0] == {"vulns": [{"id": "PYSEC-2025-211", "modified": "2026-05-20T09:19:20.358167Z"}]}
    assert [v["id"] for v in results[1]["vulns"]] == ["PYSEC-2025-189", "PYSEC-2026-139", "PYSEC-2026-2286"]
    assert results[2] == {}


def test_more_than_1000_queries_is_refused(http):
    """The API's limit is enforced: 1,001 queries answer 400."""
    query = {"package": {"name": "torch", "ecosystem": "PyPI"}, "version": "2.0.0"}
    response = http.post("/v1/querybatch", json={"queries": [query] * 1001})
    assert response.status_code == 400 and "Too many queries" in response.json()["message"]


def test_withdrawn_records_leave_queries_but_stay_readable(fake, http):
    """A withdrawn record is no longer returned by queries; /v1/vulns still serves it, with `withdrawn`."""
    fake.withdraw("PYSEC-2026-2286", "2026-12-01T00:00:00Z")
    body = {"queries": [{"package": {"name": "torch", "ecosystem": "PyPI"}, "version": "2.9.1"}]}
    ids = [v["id"] for v in http.post("/v1/querybatch", json=body).json()["results"][0]["vulns"]]
    assert "PYSEC-2026-2286" not in ids
    assert http.get("/v1/vulns/PYSEC-2026-2286").json()["withdrawn"] == "2026-12-01T00:00:00Z"


def test_query_returns_full_records(http, records):
    """POST /v1/query answers the full records, like OSV."""
    body = {"package": {"name": "torch", "ecosystem": "PyPI"}, "version": "1.13.0"}
    vulns = http.post("/v1/query", json=body).json()["vulns"]
    assert records["PYSEC-2022-43015"] in vulns


def test_requests_are_counted(fake, http):
    """Each answered request is recorded with its endpoint and, for querybatch, its number of queries."""
    http.post("/v1/querybatch", json={"queries": [{"package": {"name": "torch", "ecosystem": "PyPI"}}]})
    http.get("/v1/vulns/PYSEC-2022-43015")
    assert fake.counts() == {"querybatch": 1, "vulns": 1}
    assert [(r.path, r.queries, r.status) for r in fake.requests] == [("/v1/querybatch", 1, 200), ("/v1/vulns/PYSEC-2022-43015", 0, 200)]


def test_unknown_fault_kind_is_refused(fake):
    """A typo in a test's fault is an error, not a silently healthy server."""
    with pytest.raises(ValueError, match="unknown fault"):
        fake.inject("explode")


def test_fake_can_start_empty():
    """OsvFake([]) serves nothing: for tests that add records one by one."""
    with OsvFake([]) as fake, httpx.Client(base_url=fake.endpoint) as client:
        body = {"queries": [{"package": {"name": "torch", "ecosystem": "PyPI"}}]}
        assert client.post("/v1/querybatch", json=body).json() == {"results": [{}]}
    assert len(bundled_records()) == 21
