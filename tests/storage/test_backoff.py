"""The one back-off formula and the one `Retry-After` reader (storage/backoff.py) that the Hub client,
the OSV client, the storage gate and webhook deliveries share."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from storage.backoff import MAX_DOUBLINGS, backoff_s, retry_after_s

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("first_s", "failures", "max_s", "expected"),
    [
        (2.0, 0, 60.0, 2.0),  # the first retry waits the first delay
        (2.0, 1, 60.0, 4.0),
        (2.0, 4, 60.0, 32.0),
        (2.0, 5, 60.0, 60.0),  # 64 s is cut to the cap
        (2.0, 1000, 60.0, 60.0),  # a long streak stays at the cap, no overflow
        (60, 3, 3600, 480),  # whole seconds stay whole (the poll settings are ints)
        (1.0, 10_000, float("inf"), 2.0**MAX_DOUBLINGS),  # without a cap the doubling stops at 2**16
        (5.0, -1, 60.0, 5.0),  # a count below zero is no failure yet
        (0.0, 3, 60.0, 0.0),  # no first delay: no wait
    ],
)
def test_backoff_doubles_per_failure_up_to_the_cap(first_s, failures, max_s, expected):
    """The wait is the first delay doubled once per earlier failure, never above the cap."""
    assert backoff_s(first_s, failures, max_s) == expected


@pytest.mark.parametrize("failures", range(0, 40))
def test_backoff_stays_within_its_bounds(failures):
    """Every wait lies between the first delay and the cap, and never shrinks as failures grow."""
    wait = backoff_s(3.0, failures, 900.0)
    assert 3.0 <= wait <= 900.0
    assert wait >= backoff_s(3.0, failures - 1, 900.0)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("120", 120.0),  # delta-seconds
        ("0", 0.0),
        (" 7 ", 7.0),  # surrounding space is not part of the value
        ("2.5", 2.5),  # fractions, as some servers send
        ("-5", 0.0),  # a negative delay means now
        ("Sun, 01 Mar 2026 12:01:30 GMT", 90.0),  # IMF-fixdate, the HTTP date form servers send
        ("Sunday, 01-Mar-26 12:00:10 GMT", 10.0),  # the obsolete RFC 850 form
        ("Sun Mar  1 12:00:05 2026", 5.0),  # the obsolete asctime form (GMT)
        ("Sun, 01 Mar 2026 12:00:45 -0000", 45.0),  # a date without a claimed zone is UTC
        ("Sun, 01 Mar 2026 11:59:00 GMT", 0.0),  # a date already past means now
        (None, None),  # no header
        ("", None),
        ("soon", None),  # neither a number nor a date
        ("Sun, 99 Mar 2026 12:00:00 GMT", None),  # a date that does not exist
        ("nan", None),  # not a finite number of seconds
        ("inf", None),
    ],
)
def test_retry_after_reads_seconds_and_http_dates(value, expected):
    """Retry-After as delta-seconds or as an HTTP date is the seconds to wait from now; anything else is None."""
    assert retry_after_s(value, NOW) == expected


def test_retry_after_measures_a_date_from_the_wall_clock_by_default():
    """Without `now`, an HTTP date is measured from the current UTC time."""
    ahead = (datetime.now(UTC) + timedelta(seconds=30)).strftime("%a, %d %b %Y %H:%M:%S GMT")
    wait = retry_after_s(ahead)
    assert wait is not None and 28 <= wait <= 30
