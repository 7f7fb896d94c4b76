"""records.py on real OSV records: aliases merged, `withdrawn` honoured, PEP 440 ranges evaluated."""

from __future__ import annotations

import pytest

from tracker.advisories.records import (
    AFFECTED,
    NOT_AFFECTED,
    UNKNOWN,
    AdvisoryIndex,
    evaluate_record,
    merge_aliases,
    parse_version,
    record_problems,
)


def test_ghsa_pysec_and_cve_of_one_issue_are_one_advisory(records):
    """GHSA-3863-2447-669p and PYSEC-2023-300 (both CVE-2023-6730) merge, named by the GHSA id."""
    [advisory] = merge_aliases([records["PYSEC-2023-300"], records["GHSA-3863-2447-669p"]])
    assert advisory.key == "GHSA-3863-2447-669p"
    assert set(advisory.ids) == {"GHSA-3863-2447-669p", "PYSEC-2023-300", "CVE-2023-6730"}
    assert advisory.modified == "2024-11-21T14:23:01.871022Z"  # the newer of the two records


def test_records_of_other_issues_stay_apart(records):
    """Two transformers advisories with the same fix but different CVEs are not merged."""
    merged = merge_aliases([records["PYSEC-2023-300"], records["PYSEC-2023-301"]])
    assert len(merged) == 2


def test_the_whole_bundle_merges_into_distinct_issues(records):
    """21 real records are 18 advisories: three pairs are one issue under two databases."""
    index = AdvisoryIndex.build(records.values())
    assert len(index.advisories) == 18
    assert index.by_id["CVE-2024-31583"].key == "GHSA-pg7h-5qx3-wjr3"


def test_withdrawn_advisory_affects_nothing(records):
    """A record with `withdrawn` set is honoured: the advisory is withdrawn and affects no version."""
    withdrawn = {**records["PYSEC-2026-2286"], "withdrawn": "2026-11-01T00:00:00Z"}
    [advisory] = merge_aliases([withdrawn])
    assert advisory.withdrawn
    assert advisory.evaluate("torch", parse_version("2.4.0")).status == NOT_AFFECTED


def test_one_withdrawn_record_of_two_leaves_the_advisory_live(records):
    """If the GHSA is withdrawn but the PYSEC of the same issue is not, the advisory still stands."""
    ghsa = {**records["GHSA-pg7h-5qx3-wjr3"], "withdrawn": "2026-11-01T00:00:00Z"}
    [advisory] = merge_aliases([ghsa, records["PYSEC-2024-251"]])
    assert not advisory.withdrawn
    assert advisory.evaluate("torch", parse_version("2.1.2")).status == AFFECTED


@pytest.mark.parametrize(
    ("text", "public", "note"),
    [
        ("4.40.0", "4.40.0", None),
        ("4.40.0.dev0", "4.40.0.dev0", None),
        ("4.40.0.dev0+local", "4.40.0.dev0", "local label +local ignored: compared as 4.40.0.dev0"),
        ("2.4.0+cu121", "2.4.0", "local label +cu121 ignored: compared as 2.4.0"),
        ("v4.3.1", "4.3.1", None),
        ("latest", None, "'latest' is not a PEP 440 version"),
        ("", None, "the version is empty"),
        ("  ", None, "the version is empty"),
        (None, None, "the version is empty"),
    ],
)
def test_parse_version(text, public, note):
    """Versions parse with PEP 440; what cannot parse, or was dropped to compare, is said in words."""
    parsed = parse_version(text)
    assert parsed.query_text == public
    assert parsed.note == note


@pytest.mark.parametrize(
    ("record", "package", "version", "status"),
    [
        ("GHSA-3863-2447-669p", "transformers", "4.35.2", AFFECTED),
        ("GHSA-3863-2447-669p", "transformers", "4.36.0", NOT_AFFECTED),  # fixed is exclusive
        ("GHSA-3863-2447-669p", "transformers", "4.36.0.dev0", AFFECTED),  # a dev build precedes the fix
        ("GHSA-3863-2447-669p", "transformers", "4.36.0rc1", AFFECTED),
        ("GHSA-3863-2447-669p", "transformers", "4.35.0.dev0+local", AFFECTED),
        ("GHSA-3863-2447-669p", "Transformers", "4.30.0", AFFECTED),  # names are canonicalised
        ("GHSA-3863-2447-669p", "torch", "1.0.0", NOT_AFFECTED),
        ("PYSEC-2026-2290", "transformers", "5.2.0", AFFECTED),  # last_affected is inclusive
        ("PYSEC-2026-2290", "transformers", "5.2.1", NOT_AFFECTED),
        ("PYSEC-2025-211", "transformers", "9.0.0", AFFECTED),  # open range: `{}` never closes it
        ("PYSEC-2022-43015", "torch", "1.0.1.post2", AFFECTED),  # listed in `versions`
        ("PYSEC-2022-43015", "torch", "1.13.1", NOT_AFFECTED),
        ("GHSA-3863-2447-669p", "transformers", "latest", UNKNOWN),
        ("GHSA-3863-2447-669p", "transformers", "", UNKNOWN),
    ],
)
def test_ranges_are_evaluated_with_pep440(records, record, package, version, status):
    """ECOSYSTEM ranges and `versions` lists decide, with packaging's PEP 440 ordering."""
    assert evaluate_record(records[record], package, parse_version(version)).status == status


def test_unparseable_version_gives_a_reason(records):
    """'latest' is not guessed at: the verdict is unknown and says why."""
    verdict = evaluate_record(records["GHSA-3863-2447-669p"], "transformers", parse_version("latest"))
    assert verdict.reason == "cannot evaluate: 'latest' is not a PEP 440 version"


def test_local_label_is_noted_when_evaluating(records):
    """A local label is dropped for the comparison and the verdict says so."""
    verdict = evaluate_record(records["GHSA-3863-2447-669p"], "transformers", parse_version("4.35.0.dev0+local"))
    assert verdict.reason == "local label +local ignored: compared as 4.35.0.dev0"


@pytest.mark.parametrize(
    ("ids", "package", "floor"),
    [
        (["GHSA-3863-2447-669p", "PYSEC-2023-300"], "transformers", ">= 4.36.0"),
        (["PYSEC-2026-2290"], "transformers", "> 5.2.0"),
        (["PYSEC-2026-2286"], "torch", ">= 2.10.0"),
        (["PYSEC-2025-211"], "transformers", "no fixed release"),
        (["PYSEC-2026-139"], "torch", "no fixed release"),
    ],
)
def test_floor_is_the_least_version_escaping_the_advisory(records, ids, package, floor):
    """`fixed` gives >= X, `last_affected` gives > X, an open range gives no fixed release."""
    [advisory] = merge_aliases([records[i] for i in ids])
    assert advisory.floor(package).text() == floor


def test_malformed_range_event_is_recorded(records):
    """The real PYSEC-2025-211 ends its range with `{}`: reported, and the rest of the record used."""
    [problem] = record_problems(records["PYSEC-2025-211"])
    assert problem == (
        "PYSEC-2025-211: an event of the transformers ECOSYSTEM range is {}, not exactly one of introduced, "
        "fixed, last_affected, limit: ignored"
    )


def test_malformed_records_fail_the_official_schema(records, osv_schema):
    """The three real records with an empty event are invalid OSV: our reading of them is deliberate."""
    invalid = sorted(i for i, r in records.items() if not osv_schema.is_valid(r))
    assert invalid == ["PYSEC-2025-189", "PYSEC-2025-211", "PYSEC-2026-139"]
