"""osv.py against the OSV fake over real HTTP: batching, paging, caching inputs, retries, bad answers."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from tracker.advisories.osv import OsvBadAnswer, OsvClient, OsvUnavailable, PackageQuery
from tracker.standins.osv import OsvFake

from .kit import Sleeps

TRANSFORMERS_4_35 = PackageQuery("transformers", "4.35.0")


def test_querybatch_answers_ids_and_modified(client, fake):
    """One request answers every query, in order, with the ids and `modified` OSV holds."""
    answer = client.querybatch([TRANSFORMERS_4_35, PackageQuery("torch", "2.9.1"), PackageQuery("transformers", "5.10.0")])
    assert {r.id for r in answer.results[PackageQuery("torch", "2.9.1")]} == {"PYSEC-2025-189", "PYSEC-2026-139", "PYSEC-2026-2286"}
    assert [r.id for r in answer.results[PackageQuery("transformers", "5.10.0")]] == ["PYSEC-2025-211"]
    ref = next(r for r in answer.results[TRANSFORMERS_4_35] if r.id == "PYSEC-2023-300")
    assert ref.modified == "2024-11-21T14:23:01.871022Z"
    assert fake.counts() == {"querybatch": 1}


def test_a_package_without_version_lists_every_advisory(client):
    """A query without a version is every live advisory of the package (what loader advice needs)."""
    answer = client.querybatch([PackageQuery("torch")])
    assert len(answer.results[PackageQuery("torch")]) == 7


def test_at_most_1000_queries_a_request(client, fake):
    """2,500 distinct queries take three requests, none over the API's limit of 1,000."""
    queries = [PackageQuery("transformers", f"4.{minor}.{patch}") for minor in range(50) for patch in range(50)]
    answer = client.querybatch(queries)
    assert len(answer.results) == 2500
    assert [r.queries for r in fake.requests] == [1000, 1000, 500]


def test_duplicate_queries_are_asked_once(client, fake):
    """The same package version named twice is one query."""
    client.querybatch([TRANSFORMERS_4_35, TRANSFORMERS_4_35])
    assert [r.queries for r in fake.requests] == [1]


def test_pages_are_followed_for_the_queries_that_have_more(sleeps):
    """With a page size of 4, the 13 advisories of transformers 4.35.0 take four pages; only the paged
    query is asked again."""
    with OsvFake(page_size=4) as fake, OsvClient(fake.endpoint, sleep=sleeps) as client:
        answer = client.querybatch([TRANSFORMERS_4_35, PackageQuery("torch", "2.9.1")])
    assert len(answer.results[TRANSFORMERS_4_35]) == 13 and not answer.incomplete
    assert [r.queries for r in fake.requests] == [2, 1, 1, 1]


@pytest.mark.parametrize(
    ("fault", "reason"),
    [
        ("page_forever", "OSV was still paging after 5 pages for transformers 4.35.0: the rest was not read"),
        ("same_token", "OSV sent page token 'the-same-token' twice for transformers 4.35.0: cut"),
    ],
)
def test_paging_forever_is_cut_with_a_reason(client, fake, fault, reason):
    """A server that never stops paging is cut at max_pages (or at a repeated token), with the reason."""
    fake.inject(fault, path="querybatch", times=100)
    answer = client.querybatch([TRANSFORMERS_4_35])
    assert answer.incomplete == {TRANSFORMERS_4_35: reason}
    assert len(fake.requests) <= 5
    assert answer.results[TRANSFORMERS_4_35]  # what was read is kept


def test_5xx_is_retried_with_backoff(client, fake, sleeps):
    """Two 503s then an answer: two retries, waiting 1 s then 2 s (injected sleep, no real waiting)."""
    fake.inject("status", status=503, path="querybatch", times=2)
    answer = client.querybatch([TRANSFORMERS_4_35])
    assert answer.results[TRANSFORMERS_4_35]
    assert sleeps.waits == [1, 2]
    assert client.counts.retries == 2


def test_429_waits_what_retry_after_says(client, fake, sleeps):
    """A 429 with Retry-After: 7 waits 7 s before asking again."""
    fake.inject("status", status=429, retry_after=7, path="vulns")
    assert client.vuln("PYSEC-2023-300")["id"] == "PYSEC-2023-300"
    assert sleeps.waits == [7]


def test_429_waits_until_the_http_date_retry_after_names(client, fake, sleeps):
    """A 429 with Retry-After as an HTTP date 20 s ahead waits those 20 s (to the second), not the back-off."""
    fake.inject("status", status=429, retry_after=format_datetime(datetime.now(UTC) + timedelta(seconds=20), usegmt=True),
                path="vulns")
    assert client.vuln("PYSEC-2023-300")["id"] == "PYSEC-2023-300"
    [wait] = sleeps.waits
    assert 18 <= wait <= 20


def test_retry_after_is_capped(fake, sleeps):
    """A Retry-After of an hour is cut to max_backoff_s."""
    fake.inject("status", status=429, retry_after=3600, path="vulns")
    with OsvClient(fake.endpoint, max_backoff_s=30, sleep=sleeps) as client:
        client.vuln("PYSEC-2023-300")
    assert sleeps.waits == [30]


def test_osv_down_raises_unavailable_after_the_last_attempt(client, fake, sleeps):
    """OSV answering 500 every time: after 3 attempts, OsvUnavailable with a readable reason."""
    fake.inject("status", status=500, times=100)
    with pytest.raises(OsvUnavailable) as caught:
        client.querybatch([TRANSFORMERS_4_35])
    assert caught.value.reason == "POST /v1/querybatch answered 500 (3 attempts)"
    assert sleeps.waits == [1, 2]


def test_slow_answer_times_out(fake, sleeps):
    """An answer slower than the time-out is retried, then reported as a time-out."""
    fake.inject("slow", delay_s=30, times=2)
    with OsvClient(fake.endpoint, timeout_s=0.2, max_attempts=2, sleep=sleeps) as client, pytest.raises(OsvUnavailable) as caught:
        client.querybatch([TRANSFORMERS_4_35])
    assert caught.value.reason == "POST /v1/querybatch timed out (2 attempts)"


def test_slow_answer_within_the_time_out_is_fine(fake, sleeps):
    """A slow but in-time answer needs no retry."""
    fake.inject("slow", delay_s=0.05)
    with OsvClient(fake.endpoint, timeout_s=5, sleep=sleeps) as client:
        assert client.querybatch([TRANSFORMERS_4_35]).results[TRANSFORMERS_4_35]
    assert sleeps.waits == []


@pytest.mark.parametrize(
    ("fault", "reason_start"),
    [
        ("malformed", "POST /v1/querybatch: the answer is not valid JSON (41 bytes;"),
        ("cut_json", "POST /v1/querybatch: the answer is not valid JSON ("),
    ],
)
def test_malformed_answer_is_a_typed_error(client, fake, sleeps, fault, reason_start):
    """HTML or JSON cut in half is OsvBadAnswer with the reason, not retried."""
    fake.inject(fault, path="querybatch")
    with pytest.raises(OsvBadAnswer) as caught:
        client.querybatch([TRANSFORMERS_4_35])
    assert caught.value.reason.startswith(reason_start)
    assert sleeps.waits == []


def test_truncated_answer_is_retried_then_reported(client, fake, sleeps):
    """A body shorter than its Content-Length is retried; cut every time, it is OsvBadAnswer."""
    fake.inject("truncated", path="querybatch", times=100)
    with pytest.raises(OsvBadAnswer) as caught:
        client.querybatch([TRANSFORMERS_4_35])
    assert caught.value.reason.startswith("POST /v1/querybatch: the answer was cut off (")
    assert caught.value.reason.endswith(", 3 attempts")


def test_truncated_once_then_complete(client, fake):
    """One truncated answer costs one retry, and the answer is complete."""
    fake.inject("truncated", path="vulns")
    assert client.vuln("GHSA-3863-2447-669p")["aliases"] == ["CVE-2023-6730"]
    assert client.counts.retries == 1


@pytest.mark.parametrize(
    ("results", "reason"),
    [
        ({"results": []}, "querybatch answered 0 results for 1 queries"),
        ({"vulns": []}, "the querybatch answer has no `results` list"),
        ({"results": [{"vulns": [{"modified": "x"}]}]}, "a vuln for transformers 4.35.0 has no id: {'modified': 'x'}"),
        ({"results": ["nope"]}, "a querybatch result for transformers 4.35.0 is str, not an object"),
    ],
)
def test_wrong_shape_is_a_typed_error(client, fake, results, reason):
    """JSON of the wrong shape is OsvBadAnswer naming what is wrong."""
    fake.inject("body", body=results, path="querybatch")
    with pytest.raises(OsvBadAnswer) as caught:
        client.querybatch([TRANSFORMERS_4_35])
    assert caught.value.reason == reason


def test_unknown_id_is_a_bad_answer(client):
    """A 404 on /v1/vulns/{id} is reported with the id."""
    with pytest.raises(OsvBadAnswer, match="OSV has no record GHSA-xxxx-xxxx-xxxx"):
        client.vuln("GHSA-xxxx-xxxx-xxxx")


def test_connection_refused_is_unavailable(sleeps):
    """Nothing listening: OsvUnavailable after the attempts, with the transport's reason."""
    with OsvFake() as fake:
        endpoint = fake.endpoint
    with OsvClient(endpoint, max_attempts=2, sleep=sleeps) as client, pytest.raises(OsvUnavailable, match=r"ConnectError"):
        client.querybatch([TRANSFORMERS_4_35])
    assert sleeps.waits == [2.0]


def test_sleeps_fixture_records(sleeps: Sleeps):
    """The injected sleep records waits instead of sleeping (the tests above rely on it)."""
    sleeps(3)
    assert sleeps.waits == [3]
