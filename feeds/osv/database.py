"""Answers to OSV queries over the stored history: which own records affect a model revision, a page at a time.

A query for a revision (`sha`) is answered from the repo's stored commit graph: a record affects the revision
when the revision descends from the record's `introduced` commit (or is it), not from its `fixed` one, and is no
later than its `last_affected` one (storage/osv_index.py matches in SQL); a commit hubwatch never ingested is
affected by nothing it knows.
A query without a revision lists every record of the repo. Withdrawn records are left out of query answers
(osv.dev does the same) but `GET /v1/vulns/{id}` and the offline database keep them, so mirrors learn of the
withdrawal. A batch answer lists ids and `modified` only, within a budget of entries per response; the
queries past the budget get a page token to ask again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from feeds.osv.queries import ModelQuery, encode_token
from feeds.osv.records import served_record
from storage.front import Storage
from storage.osv_index import Ask, OwnRange

QUERY_PAGE = 1000  # records per page of POST /v1/query (osv.dev's figure)
BATCH_PAGE = 1000  # entries per query per page of POST /v1/querybatch
BATCH_BUDGET = 10_000  # entries in one querybatch answer, all queries together
MAX_BATCH = 1000  # queries in one querybatch (osv.dev's limit)


@dataclass
class Page:
    """One query's answer: the matching records of this page and the token of the next (None: the last page)."""

    rows: list[OwnRange] = field(default_factory=list)
    next_token: str | None = None


class OsvDatabase:
    """hubwatch's own records, queried as osv.dev is."""

    def __init__(self, store: Storage, *, query_page: int = QUERY_PAGE, batch_page: int = BATCH_PAGE,
                 batch_budget: int = BATCH_BUDGET) -> None:
        self.store = store
        self.index = store.osv_index
        self.query_page = query_page
        self.batch_page = batch_page
        self.batch_budget = batch_budget

    # -- the API -------------------------------------------------------------------------------------

    def query(self, query: ModelQuery, pages_url: str | None) -> dict[str, Any]:
        """POST /v1/query's answer: the full records of one page, `{}` when none match."""
        page = self.pages([query], self.query_page)[0]
        rows = self.index.own_by_ids(r.id for r in page.rows)
        links = self.index.upstream_links(r.revision_id for r in page.rows)
        answer: dict[str, Any] = {}
        if page.rows:  # in the page's order; a record deleted since it was matched is left out
            answer["vulns"] = [served_record(rows[r.id], links.get(r.revision_id, ()), pages_url) for r in page.rows if r.id in rows]
        if page.next_token:
            answer["next_page_token"] = page.next_token
        return answer

    def querybatch(self, queries: Sequence[ModelQuery]) -> dict[str, Any]:
        """POST /v1/querybatch's answer: per query, in order, the ids and `modified` of one page."""
        results = []
        for page in self.pages(queries, self.batch_page, self.batch_budget):
            result: dict[str, Any] = {}
            if page.rows:
                result["vulns"] = [{"id": r.id, "modified": r.modified} for r in page.rows]
            if page.next_token:
                result["next_page_token"] = page.next_token
            results.append(result)
        return {"results": results}

    def vuln(self, record_id: str, pages_url: str | None) -> dict[str, Any] | None:
        """GET /v1/vulns/{id}: the full record, withdrawn or not; None for an id not stored."""
        row = self.index.own_by_id(record_id)
        if row is None:
            return None
        links = self.index.upstream_links([row.revision_id])
        return served_record(row, links.get(row.revision_id, ()), pages_url)

    # -- the offline database ----------------------------------------------------------------------------

    def records_since(self, since: datetime | None, pages_url: str | None = None) -> list[dict[str, Any]]:
        """Every record (withdrawn ones too) whose `modified` is at or after `since` (all without it), by id."""
        rows = self.index.own_modified_since(since)
        if since is not None:
            rows = [r for r in rows if _parsed(str(r.record.get("modified", ""))) >= since]
        links = self.index.upstream_links(r.revision_id for r in rows)
        return [served_record(r, links.get(r.revision_id, ()), pages_url) for r in rows]

    # -- matching ------------------------------------------------------------------------------------

    def pages(self, queries: Sequence[ModelQuery], page_size: int, budget: int | None = None) -> list[Page]:
        """Each query's page, in order; with `budget`, at most that many rows over all of them (a query past it
        gets a token to its own offset). All the queries are matched at once (storage/osv_index.py), each to one
        record past its page, which says whether another page follows."""
        asks = [Ask(q.repo_id, q.sha, q.offset + page_size + 1 if q.known else 0) for q in queries]
        found = self.index.matching(asks)
        left = budget
        out = []
        for q, matching in zip(queries, found, strict=True):
            size = page_size if left is None else min(page_size, left)
            rows = matching[q.offset : q.offset + size]
            following = q.offset + len(rows)
            token = encode_token(following, q.key) if following < len(matching) else None
            if left is not None:
                left -= len(rows)
            out.append(Page(rows, token))
        return out


def _parsed(stamp: str) -> datetime:
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return datetime.max.replace(tzinfo=UTC)  # unreadable: kept rather than lost from an incremental export
