"""An OSV client written only from osv.dev's API documentation (osv.dev/docs, "API"): what a scanner does.
It knows nothing of hubwatch: a base URL, `POST /v1/querybatch` following each query's `next_page_token` until
none is left, then `GET /v1/vulns/{id}` for each id; `POST /v1/query` following `next_page_token` likewise."""

from __future__ import annotations

from typing import Any

import httpx


class PlainOsvClient:
    def __init__(self, base_url: str, **kwargs: Any) -> None:
        self.http = httpx.Client(base_url=base_url, timeout=30, **kwargs)

    def close(self) -> None:
        self.http.close()

    def query(self, query: dict[str, Any]) -> list[dict[str, Any]]:
        """Every vulnerability of one query, all pages."""
        vulns: list[dict[str, Any]] = []
        body = dict(query)
        while True:
            answer = self.http.post("/v1/query", json=body)
            answer.raise_for_status()
            page = answer.json()
            vulns += page.get("vulns", [])
            if not page.get("next_page_token"):
                return vulns
            body = {**query, "page_token": page["next_page_token"]}

    def querybatch_ids(self, queries: list[dict[str, Any]]) -> list[list[str]]:
        """Per query, in order, every vulnerability id (all pages)."""
        ids: list[list[str]] = [[] for _ in queries]
        pending = {i: dict(q) for i, q in enumerate(queries)}
        while pending:
            order = sorted(pending)
            answer = self.http.post("/v1/querybatch", json={"queries": [pending[i] for i in order]})
            answer.raise_for_status()
            results = answer.json()["results"]
            assert len(results) == len(order)
            following = {}
            for i, result in zip(order, results, strict=True):
                ids[i] += [v["id"] for v in result.get("vulns", [])]
                if result.get("next_page_token"):
                    following[i] = {**queries[i], "page_token": result["next_page_token"]}
            pending = following
        return ids

    def vuln(self, vuln_id: str) -> dict[str, Any]:
        answer = self.http.get(f"/v1/vulns/{vuln_id}")
        answer.raise_for_status()
        return answer.json()
