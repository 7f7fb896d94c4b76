"""The OSV-compatible API (`POST /v1/query`, `POST /v1/querybatch`, `GET /v1/vulns/{id}`) over the shared history
with own records planted on it: which records affect which revision, osv.dev's shapes and page tokens, the
official OSV schema, osv.dev's refusals, and a client written only from osv.dev's documentation."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest

from storage.front import Storage
from tests.support.osv_client import PlainOsvClient
from tests.support.osv_records import Planted, at, custom_code, dangerous_pickle, plant, record_for
from tests.support.served import HOSTILE, LLAMA, History, Served, serve

pytestmark = pytest.mark.postgres  # the own-record reads (JSON keys read in SQL) run on PostgreSQL too (.ci/run)
SCHEMA = Path(__file__).resolve().parents[1] / "fixtures" / "osv" / "osv-schema.json"
PAGE = 1000


@pytest.fixture(scope="module")
def osv_schema() -> jsonschema.Draft202012Validator:
    schema = json.loads(SCHEMA.read_text())
    return jsonschema.Draft202012Validator(schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)


class World:
    """The served copy, each repo's revisions oldest first, and the records planted on them."""

    def __init__(self, served: Served) -> None:
        self.served = served
        self.store: Storage = served.store
        self.chain = {repo: [r.sha for r in reversed(self.store.history.list_revisions(repo, limit=100))] for repo in (LLAMA, HOSTILE)}
        self.revision_ids = {(repo, r.sha): r.id for repo in (LLAMA, HOSTILE) for r in self.store.history.list_revisions(repo, limit=100)}
        self.stored = {o.id: o for o in self.store.advisories.own()}  # what the ingest itself wrote
        llama, hostile = self.chain[LLAMA], self.chain[HOSTILE]
        when = at("2026-11-01T10:00:00")
        self.planted: dict[str, Planted] = {p.id: p for p in plant(self.store, [
            record_for(LLAMA, llama[1], dangerous_pickle(), at=when, fixed_sha=llama[3]),
            record_for(LLAMA, llama[4], custom_code(), at=at("2026-11-02T10:00:00")),
            record_for(LLAMA, llama[2], dangerous_pickle("extra.pkl"), at=when, withdrawn=True),
            record_for(HOSTILE, hostile[1], custom_code("evil.py"), at=when),
        ], self.revision_ids)}

    def expected(self, repo: str, sha: str) -> set[str]:
        """Own records whose range holds `sha`, from the chain alone (linear histories): introduced at or before,
        not fixed at or before, not withdrawn."""
        chain = self.chain[repo]
        rows = [o for o in self.store.advisories.own(repo) if not o.record.get("withdrawn")]
        return {o.id for o in rows if chain.index(o.sha) <= chain.index(sha)
                and (o.fixed_sha is None or chain.index(sha) < chain.index(o.fixed_sha))}

    def all_of(self, repo: str) -> set[str]:
        return {o.id for o in self.store.advisories.own(repo) if not o.record.get("withdrawn")}


@pytest.fixture(scope="module")
def world(history: History, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    copy = history.copy_to(tmp_path_factory.mktemp("osv-api"))
    with serve(copy.store()) as served:
        yield World(served)


@pytest.fixture
def client(world: World) -> Iterator[httpx.Client]:
    with world.served.client() as c:
        yield c


def purl(repo: str, sha: str | None = None) -> str:
    return f"pkg:huggingface/{repo}" + (f"@{sha}" if sha else "")


def ids(answer: httpx.Response) -> set[str]:
    assert answer.status_code == 200, answer.text
    return {v["id"] for v in answer.json().get("vulns", [])}


# -- which records a query finds ---------------------------------------------------------------------------


def test_the_planted_history_has_records_on_both_sides_of_a_fix(world: World) -> None:
    """The fixture itself: a fixed record, an open one, a withdrawn one, and the record the ingest wrote."""
    llama = world.chain[LLAMA]
    assert len(llama) == 7 and len(world.stored) >= 1
    assert {p.fixed_sha for p in world.planted.values()} == {None, llama[3]}
    assert world.expected(LLAMA, llama[0]) == set()
    assert len(world.expected(LLAMA, llama[2])) >= 2 and world.expected(LLAMA, llama[2]) != world.expected(LLAMA, llama[4])


@pytest.mark.parametrize("index", range(7))
def test_a_purl_with_a_commit_finds_the_records_whose_range_holds_it(world: World, client: httpx.Client, index: int) -> None:
    """`pkg:huggingface/ORG/NAME@SHA`, the same purl without the commit and `version` = the sha, and `commit` alone all
    answer the records introduced at or before that revision and not fixed by then; withdrawn ones never."""
    sha = world.chain[LLAMA][index]
    expected = world.expected(LLAMA, sha)
    assert ids(client.post("/v1/query", json={"package": {"purl": purl(LLAMA, sha)}})) == expected
    assert ids(client.post("/v1/query", json={"package": {"purl": purl(LLAMA)}, "version": sha})) == expected
    assert ids(client.post("/v1/query", json={"commit": sha})) == expected
    assert ids(client.post("/v1/query", json={"commit": sha.upper(), "package": {"purl": purl(LLAMA)}})) == expected


def test_a_purl_without_a_commit_lists_every_record_of_the_repo(world: World, client: httpx.Client) -> None:
    """No version: every record of the model, fixed ones too, withdrawn ones left out; another repo's not."""
    assert ids(client.post("/v1/query", json={"package": {"purl": purl(LLAMA)}})) == world.all_of(LLAMA)
    assert ids(client.post("/v1/query", json={"package": {"purl": purl(HOSTILE)}})) == world.all_of(HOSTILE)
    assert world.all_of(LLAMA).isdisjoint(world.all_of(HOSTILE))


def test_the_git_ecosystem_and_the_repo_url_name_the_same_package(world: World, client: httpx.Client) -> None:
    """`name` + `ecosystem: GIT` with the repo's Hub URL (the records' own `affected.package`) finds what the purl finds."""
    sha = world.chain[LLAMA][2]
    body = {"package": {"ecosystem": "GIT", "name": f"https://huggingface.co/{LLAMA}"}, "version": sha}
    assert ids(client.post("/v1/query", json=body)) == world.expected(LLAMA, sha)


@pytest.mark.parametrize("body", [
    {"package": {"purl": "pkg:pypi/transformers@4.40.0"}},
    {"package": {"name": "transformers", "ecosystem": "PyPI"}, "version": "4.40.0"},
    {"package": {"ecosystem": "GIT", "name": "https://github.com/huggingface/transformers"}},
    {"package": {"purl": "pkg:huggingface/nobody/never-watched@" + "a" * 40}},
    {"commit": "0" * 40},
    {"package": {"purl": f"pkg:huggingface/{LLAMA}@" + "f" * 40}},
])
def test_packages_and_commits_hubwatch_knows_nothing_of_answer_empty(client: httpx.Client, body: dict[str, Any]) -> None:
    """Another ecosystem, another git host, a repo not watched, a commit never ingested: `{}` as osv.dev answers for
    a package it has nothing on (osv.dev no longer refuses an unknown purl type)."""
    answer = client.post("/v1/query", json=body)
    assert answer.status_code == 200 and answer.json() == {}


# -- the records ---------------------------------------------------------------------------------------------


def test_every_record_validates_against_the_official_osv_schema(world: World, client: httpx.Client,
                                                               osv_schema: jsonschema.Draft202012Validator) -> None:
    """Each record the API serves (queries and GET, withdrawn ones too) is valid OSV (schema committed in
    tests/fixtures/osv, version in its SOURCES.md)."""
    served = client.post("/v1/query", json={"package": {"purl": purl(LLAMA)}}).json()["vulns"]
    served += client.post("/v1/query", json={"package": {"purl": purl(HOSTILE)}}).json()["vulns"]
    served += [client.get(f"/v1/vulns/{p.id}").json() for p in world.planted.values() if p.withdrawn]
    assert len(served) == len(world.all_of(LLAMA)) + len(world.all_of(HOSTILE)) + 1
    for record in served:
        errors = [e.message for e in osv_schema.iter_errors(record)]
        assert errors == [], (record["id"], errors)


def test_a_record_says_what_a_scanner_needs(world: World, client: httpx.Client) -> None:
    """A GIT range on the repo's Hub URL with `introduced` and `fixed` commits, the model's purl on the package, the kind
    and severity in `database_specific`, the revision's page among the references, the upstream advisories of that
    revision's loaders as `related`."""
    llama = world.chain[LLAMA]
    fixed = next(p for p in world.planted.values() if p.fixed_sha)
    record = client.get(f"/v1/vulns/{fixed.id}").json()
    (affected,) = record["affected"]
    assert affected["package"] == {"ecosystem": "GIT", "name": f"https://huggingface.co/{LLAMA}", "purl": purl(LLAMA)}
    assert affected["ranges"] == [{"type": "GIT", "repo": f"https://huggingface.co/{LLAMA}",
                                   "events": [{"introduced": llama[1]}, {"fixed": llama[3]}]}]
    assert record["database_specific"]["kind"] == "pickle-dangerous-import"
    assert record["database_specific"]["severity"] == "critical"
    assert record["database_specific"]["hubwatch"]["purl"] == purl(LLAMA, llama[1])
    pages = {r["url"] for r in record["references"] if r["type"] == "WEB"}
    assert pages == {f"{world.served.url}/repos/{LLAMA}/revisions/{llama[1]}", f"{world.served.url}/repos/{LLAMA}/revisions/{llama[3]}"}
    links = world.store.osv_index.upstream_links([world.revision_ids[(LLAMA, llama[1])]])[world.revision_ids[(LLAMA, llama[1])]]
    assert links, "the history links upstream advisories to this revision"
    assert set(record["related"]) == {i for lk in links for i in lk.ids}
    assert {a["id"] for a in record["database_specific"]["hubwatch"]["loader_advisories"]} == {lk.advisory_key for lk in links}
    assert "GHSA-fgcw-684q-jj6r" not in record["related"]  # linked to the revision but judged not to concern this model


def test_each_record_has_the_one_range_its_row_holds(world: World) -> None:
    """Matching reads a record's range from its row (introduced at `sha`, fixed at `fixed_sha`) rather than parsing
    every record: what the ingest and the closing of records write keeps the two the same."""
    ranges = world.store.osv_index.own_ranges([LLAMA, HOSTILE])
    rows = {o.id: o for o in world.store.advisories.own()}
    assert sum(len(r) for r in ranges.values()) == len(rows) >= 5
    for r in (r for rs in ranges.values() for r in rs):
        (affected,) = rows[r.id].record["affected"]
        assert affected["ranges"] == [{"type": "GIT", "repo": affected["package"]["name"], "events": r.events}]
        assert (r.modified, r.withdrawn) == (rows[r.id].record["modified"], bool(rows[r.id].record.get("withdrawn")))


def test_get_answers_the_record_a_query_answers(world: World, client: httpx.Client) -> None:
    """GET /v1/vulns/{id} is the very record /v1/query lists, and querybatch's `modified` is the record's."""
    for record in client.post("/v1/query", json={"package": {"purl": purl(LLAMA)}}).json()["vulns"]:
        assert client.get(f"/v1/vulns/{record['id']}").json() == record
    batch = client.post("/v1/querybatch", json={"queries": [{"package": {"purl": purl(LLAMA)}}]}).json()
    full = {r["id"]: r["modified"] for r in client.post("/v1/query", json={"package": {"purl": purl(LLAMA)}}).json()["vulns"]}
    assert {v["id"]: v["modified"] for v in batch["results"][0]["vulns"]} == full


def test_a_withdrawn_record_is_found_by_id_only(world: World, client: httpx.Client) -> None:
    """Withdrawn: left out of query answers (as osv.dev does), still served by id with its `withdrawn` time."""
    withdrawn = next(p for p in world.planted.values() if p.withdrawn)
    assert withdrawn.id not in ids(client.post("/v1/query", json={"package": {"purl": purl(LLAMA)}}))
    assert client.get(f"/v1/vulns/{withdrawn.id}").json()["withdrawn"] == withdrawn.record["withdrawn"]


# -- querybatch ----------------------------------------------------------------------------------------------


def test_querybatch_answers_ids_and_modified_per_query_in_order(world: World, client: httpx.Client) -> None:
    """One result per query, in the order asked, `{}` for a query with nothing, each vuln only `id` and `modified`."""
    llama = world.chain[LLAMA]
    queries = [{"package": {"purl": purl(LLAMA, sha)}} for sha in llama] + [{"package": {"purl": "pkg:pypi/torch@2.0.0"}},
                                                                           {"commit": world.chain[HOSTILE][1]}]
    results = client.post("/v1/querybatch", json={"queries": queries}).json()["results"]
    assert len(results) == len(queries)
    for sha, result in zip(llama, results, strict=False):
        assert {v["id"] for v in result.get("vulns", [])} == world.expected(LLAMA, sha)
        assert all(set(v) == {"id", "modified"} for v in result.get("vulns", []))
    assert results[0] == {} and results[-2] == {}
    assert {v["id"] for v in results[-1]["vulns"]} == world.expected(HOSTILE, world.chain[HOSTILE][1])
    assert client.post("/v1/querybatch", json={"queries": []}).json() == {"results": []}
    assert client.post("/v1/querybatch", json={}).json() == {"results": []}


def test_a_client_written_from_osv_dev_documentation_works_unchanged(world: World) -> None:
    """The plain client (querybatch, following page tokens, then GET per id; /v1/query) finds what the history holds."""
    client = PlainOsvClient(world.served.url)
    try:
        llama = world.chain[LLAMA]
        found = client.querybatch_ids([{"package": {"purl": purl(LLAMA, sha)}} for sha in llama])
        assert [set(f) for f in found] == [world.expected(LLAMA, sha) for sha in llama]
        records = [client.vuln(i) for i in sorted(set().union(*map(set, found)))]
        assert all(r["affected"][0]["ranges"][0]["type"] == "GIT" for r in records)
        assert {r["id"] for r in client.query({"commit": llama[5]})} == world.expected(LLAMA, llama[5])
    finally:
        client.close()


# -- refusals, as osv.dev refuses ------------------------------------------------------------------------------


@pytest.mark.parametrize(("body", "reason"), [
    ({"package": {"purl": "pkg:huggingface"}}, "Invalid PURL"),
    ({"package": {"purl": "huggingface/meta-llama/x"}}, "Invalid PURL"),
    ({"package": {"purl": "pkg:huggingface/gpt2@" + "a" * 40}}, "no namespace"),
    ({"package": {"purl": "pkg:huggingface/a/b/c@" + "a" * 40}}, "not a Hub repo id"),
    ({"package": {"purl": f"pkg:huggingface/{LLAMA}@main"}}, "not a full commit sha"),
    ({"package": {"purl": f"pkg:huggingface/{LLAMA}@" + "a" * 40}, "version": "a" * 40}, "given twice"),
    ({"package": {"purl": f"pkg:huggingface/{LLAMA}", "ecosystem": "GIT"}}, "not both"),
    ({"package": {"name": "x"}}, "needs its ecosystem"),
    ({"commit": "a" * 40, "version": "a" * 40}, "both set"),
    ({"commit": "abc123"}, "not a full commit sha"),
    ({}, "name a package"),
    ({"version": "a" * 40}, "name a package"),
    ({"package": {"purl": 7}}, "package.purl"),
    ({"package": {"purl": purl(LLAMA)}, "pageToken": "x"}, "pageToken"),
    ({"package": {"purl": purl(LLAMA)}, "page_token": "not-a-token!"}, "Invalid page token"),
    ([], "valid dictionary"),
])
def test_malformed_queries_answer_400_with_the_reason(client: httpx.Client, body: Any, reason: str) -> None:
    """osv.dev's refusal: 400 with `{"code": 3, "message"}` naming what is wrong; never a traceback."""
    answer = client.post("/v1/query", json=body)
    assert answer.status_code == 400
    error = answer.json()
    assert error["code"] == 3 and reason in error["message"], error


@pytest.mark.parametrize("raw", [b"{", b'{"commit": NaN}', b'{"commit": "a", "commit": "b"}', b"\xff\xfe", b"[" * 100_000])
def test_hostile_json_answers_400(client: httpx.Client, raw: bytes) -> None:
    """Bytes that are not JSON a sender acting in good faith would write: 400 in osv.dev's shape."""
    answer = client.post("/v1/querybatch", content=raw, headers={"Content-Type": "application/json"})
    assert answer.status_code == 400 and answer.json()["code"] == 3


def test_a_bad_query_in_a_batch_refuses_the_batch_naming_it(world: World, client: httpx.Client) -> None:
    """As osv.dev: one malformed query refuses the whole batch; the message names its index."""
    queries = [{"package": {"purl": purl(LLAMA)}}, {"package": {"purl": "pkg:huggingface/x/y@zz"}}]
    answer = client.post("/v1/querybatch", json={"queries": queries})
    assert answer.status_code == 400 and answer.json()["message"].startswith("queries.1: Invalid version")


@pytest.mark.parametrize("count", [1001, 10_000])
def test_more_than_a_thousand_queries_are_refused(client: httpx.Client, count: int) -> None:
    """osv.dev's limit: at most 1,000 queries a batch; 1,001 or 10,000 answer 400 with both numbers."""
    answer = client.post("/v1/querybatch", json={"queries": [{"commit": "a" * 40}] * count})
    assert answer.status_code == 400
    assert answer.json() == {"code": 3, "message": f"Too many queries: {count} (at most 1000 a batch)", "details": []}


def test_a_thousand_queries_are_answered(world: World, client: httpx.Client) -> None:
    """The limit itself: 1,000 purl queries (with versions) fit in the body limit and are answered in order."""
    llama = world.chain[LLAMA]
    queries = [{"package": {"purl": purl(LLAMA)}, "version": llama[i % 7]} for i in range(1000)]
    results = client.post("/v1/querybatch", json={"queries": queries}).json()["results"]
    assert [{v["id"] for v in r.get("vulns", [])} for r in results[:7]] == [world.expected(LLAMA, sha) for sha in llama]
    assert len(results) == 1000 and results[7] == results[0]


def test_a_body_of_100_mb_is_refused_before_it_is_read(client: httpx.Client) -> None:
    """A 100 MB body declared up front answers 400 with the limit at once and closes the connection: the server holds
    at most its limit of it, whatever the sender meant to send."""
    size = 100 * 1024 * 1024
    sent = 0

    def body() -> Iterator[bytes]:
        nonlocal sent
        chunk = b" " * (1 << 20)
        for _ in range(100):
            sent += len(chunk)
            yield chunk

    try:
        answer = client.post("/v1/querybatch", content=body(), headers={"Content-Length": str(size), "Content-Type": "application/json"})
    except httpx.TransportError:  # the server closed while the body was still going: refused without reading it
        assert sent < size
        return
    assert answer.status_code == 400 and "too large" in answer.json()["message"]
    assert answer.headers["connection"] == "close"


def test_an_unknown_id_answers_404_in_osv_shape(client: httpx.Client) -> None:
    """osv.dev's NOT_FOUND: 404 with code 5."""
    answer = client.get("/v1/vulns/GHSA-0000-0000-0000")
    assert answer.status_code == 404 and answer.json()["code"] == 5 and "Bug not found" in answer.json()["message"]


def test_a_private_server_asks_for_its_read_token(history: History, tmp_path_factory: pytest.TempPathFactory) -> None:
    """The OSV routes follow the read policy: 401 without the token, the answer with it."""
    copy = history.copy_to(tmp_path_factory.mktemp("osv-private"))
    with serve(copy.store(), read_token="r3ad") as served, served.client() as c:
        assert c.post("/v1/query", json={"package": {"purl": purl(LLAMA)}}).status_code == 401
        answer = c.post("/v1/query", json={"package": {"purl": purl(LLAMA)}}, headers={"Authorization": "Bearer r3ad"})
        assert answer.status_code == 200 and answer.json()["vulns"]


# -- pages ------------------------------------------------------------------------------------------------------

CROWD = 1205


@pytest.fixture(scope="module")
def crowded(history: History, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """A copy with CROWD records on one revision of the hostile repo: more than a page."""
    copy = history.copy_to(tmp_path_factory.mktemp("osv-pages"))
    with serve(copy.store()) as served:
        store = served.store
        sha = store.history.list_revisions(HOSTILE, limit=1)[0].sha
        revision_ids = {(HOSTILE, sha): store.history.list_revisions(HOSTILE, limit=1)[0].id}
        when = at("2026-11-03T00:00:00")
        plant(store, [record_for(HOSTILE, sha, custom_code(), at=when, salt=f"{i:04d}") for i in range(CROWD)], revision_ids)
        yield served


def test_query_pages_a_thousand_records_at_a_time(crowded: Served) -> None:
    """Over 1,000 matches: the first answer has 1,000 and a `next_page_token`; sent back with the same query it gives the
    rest and no token; together every record once."""
    query = {"package": {"purl": purl(HOSTILE)}}
    with crowded.client() as c:
        first = c.post("/v1/query", json=query).json()
        assert len(first["vulns"]) == PAGE and first["next_page_token"]
        second = c.post("/v1/query", json={**query, "page_token": first["next_page_token"]}).json()
        assert "next_page_token" not in second
        seen = [v["id"] for v in first["vulns"] + second["vulns"]]
        total = len(crowded.store.advisories.own(HOSTILE))
        assert total == CROWD and len(seen) == len(set(seen)) == total


def test_a_page_token_belongs_to_its_query(crowded: Served) -> None:
    """A token sent with another query is refused rather than skipping that query's first records."""
    with crowded.client() as c:
        token = c.post("/v1/query", json={"package": {"purl": purl(HOSTILE)}}).json()["next_page_token"]
        answer = c.post("/v1/query", json={"package": {"purl": purl(LLAMA)}, "page_token": token})
        assert answer.status_code == 400 and "another query" in answer.json()["message"]


def test_querybatch_pages_each_query_and_bounds_the_whole_answer(crowded: Served) -> None:
    """Each query pages at 1,000 entries with its own token; past 10,000 entries in one answer the remaining queries
    get only a token, so no answer is unbounded; the plain client, following tokens, gets every id of every query."""
    query = {"package": {"purl": purl(HOSTILE)}}
    with crowded.client() as c:
        results = c.post("/v1/querybatch", json={"queries": [query] * 12}).json()["results"]
    assert [len(r.get("vulns", [])) for r in results] == [PAGE] * 10 + [0, 0]
    assert all(r["next_page_token"] for r in results)
    client = PlainOsvClient(crowded.url)
    try:
        found = client.querybatch_ids([query] * 12)
    finally:
        client.close()
    total = len(crowded.store.advisories.own(HOSTILE))
    assert all(len(f) == len(set(f)) == total for f in found)
