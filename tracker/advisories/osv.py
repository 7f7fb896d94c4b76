"""The OSV API over httpx: the only module that speaks OSV's HTTP.

- `querybatch`: at most 1,000 queries a request; results with `next_page_token` are asked again with
  `page_token`, at most `max_pages` times (a server that pages forever is cut, the cut queries reported
  in `BatchAnswer.incomplete` with a reason);
- `vuln`: one full record by id (callers cache it by `modified`);
- time-outs, connection errors, 429 and 5xx are retried with exponential back-off (a 429's
  `Retry-After` honoured, in seconds or as an HTTP date, capped), through an injectable `sleep`; what still fails raises `OsvUnavailable`;
- an answer that is not what the API promises (not JSON, the wrong shape, cut short) raises
  `OsvBadAnswer`. Both carry a `reason` a person can read.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Self

import httpx
import structlog

from storage.backoff import backoff_s, retry_after_s
from tracker.errors import HubwatchError

log = structlog.get_logger(__name__)

QUERYBATCH_LIMIT = 1000
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
USER_AGENT = "hubwatch (+https://github.com/hubwatch)"


class OsvError(HubwatchError):
    """Talking to OSV failed; `reason` says how."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class OsvUnavailable(OsvError):
    """OSV did not answer in time, or kept answering 429/5xx: ask again later."""


class OsvBadAnswer(OsvError):
    """OSV answered something the API does not promise (malformed, truncated, paging forever)."""


@dataclass(frozen=True)
class PackageQuery:
    """One querybatch query: a PyPI package at one version, or (version None) every advisory of it."""

    name: str
    version: str | None = None
    ecosystem: str = "PyPI"

    def payload(self, page_token: str | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"package": {"name": self.name, "ecosystem": self.ecosystem}}
        if self.version is not None:
            body["version"] = self.version
        if page_token:
            body["page_token"] = page_token
        return body


@dataclass(frozen=True)
class VulnRef:
    id: str
    modified: str


@dataclass
class BatchAnswer:
    results: dict[PackageQuery, list[VulnRef]] = field(default_factory=dict)
    incomplete: dict[PackageQuery, str] = field(default_factory=dict)  # query -> why its list is cut


@dataclass
class RequestCounts:
    querybatch: int = 0
    vulns: int = 0
    retries: int = 0
    pages: int = 0


class OsvClient:
    """A client for one OSV API base URL. Use as a context manager, or call `close()`."""

    def __init__(
        self,
        api_url: str,
        *,
        timeout_s: float = 30.0,
        max_attempts: int = 4,
        backoff_s: float = 2.0,
        max_backoff_s: float = 60.0,
        max_pages: int = 20,
        sleep: Callable[[float], None] = time.sleep,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.api_url = api_url.rstrip("/")
        self.max_attempts = max(1, max_attempts)
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.max_pages = max(1, max_pages)
        self.sleep = sleep
        self.counts = RequestCounts()
        self._http = httpx.Client(
            base_url=self.api_url,
            timeout=httpx.Timeout(timeout_s),
            headers={"User-Agent": USER_AGENT, "Accept": "application/json"},
            transport=transport,
            follow_redirects=False,
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the API ---------------------------------------------------------------------------------------

    def querybatch(self, queries: Sequence[PackageQuery]) -> BatchAnswer:
        """Vulnerability ids and `modified` for every query, in chunks of at most 1,000, pages followed."""
        answer = BatchAnswer()
        unique = list(dict.fromkeys(queries))
        for start in range(0, len(unique), QUERYBATCH_LIMIT):
            self._batch(unique[start : start + QUERYBATCH_LIMIT], answer)
        return answer

    def vuln(self, vuln_id: str) -> dict[str, Any]:
        """The full OSV record of one id."""
        self.counts.vulns += 1
        response = self._request("GET", f"/v1/vulns/{vuln_id}")
        if response.status_code == 404:
            raise OsvBadAnswer(f"OSV has no record {vuln_id} (404), though a query named it")
        self._raise_for_status(response, f"GET /v1/vulns/{vuln_id}")
        record = self._json(response, f"GET /v1/vulns/{vuln_id}")
        if not isinstance(record, dict) or not isinstance(record.get("modified"), str):
            raise OsvBadAnswer(f"the record of {vuln_id} has no `modified` timestamp")
        if record.get("id") != vuln_id and vuln_id not in (record.get("aliases") or ()):
            raise OsvBadAnswer(f"asked for {vuln_id}, OSV answered the record of {record.get('id')!r}")
        return record

    # -- querybatch pages ---------------------------------------------------------------------------------

    def _batch(self, chunk: list[PackageQuery], answer: BatchAnswer) -> None:
        pending: dict[PackageQuery, str | None] = dict.fromkeys(chunk)
        seen_tokens: dict[PackageQuery, set[str]] = {q: set() for q in chunk}
        for _page in range(self.max_pages):
            queries = list(pending)
            results = self._querybatch_page([q.payload(pending[q]) for q in queries])
            self.counts.pages += 1
            pending = {}
            for query, result in zip(queries, results, strict=True):
                refs, token = _parse_result(result, query)
                answer.results.setdefault(query, []).extend(refs)
                if not token:
                    continue
                if token in seen_tokens[query]:
                    answer.incomplete[query] = f"OSV sent page token {token[:20]!r} twice for {_label(query)}: cut"
                    continue
                seen_tokens[query].add(token)
                pending[query] = token
            if not pending:
                return
        for query in pending:
            answer.incomplete[query] = (
                f"OSV was still paging after {self.max_pages} pages for {_label(query)}: the rest was not read"
            )
        log.warning("osv_paging_cut", queries=len(pending), max_pages=self.max_pages)

    def _querybatch_page(self, payload: list[dict[str, Any]]) -> list[Any]:
        self.counts.querybatch += 1
        response = self._request("POST", "/v1/querybatch", json={"queries": payload})
        self._raise_for_status(response, "POST /v1/querybatch")
        body = self._json(response, "POST /v1/querybatch")
        results = body.get("results") if isinstance(body, dict) else None
        if not isinstance(results, list):
            raise OsvBadAnswer("the querybatch answer has no `results` list")
        if len(results) != len(payload):
            raise OsvBadAnswer(f"querybatch answered {len(results)} results for {len(payload)} queries")
        return results

    # -- one HTTP exchange, retried ------------------------------------------------------------------------

    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        last = ""
        for attempt in range(1, self.max_attempts + 1):
            wait: float | None = None
            try:
                response = self._http.request(method, path, **kwargs)
                response.read()
            except httpx.TimeoutException:
                last = f"{method} {path} timed out"
            except httpx.RemoteProtocolError as err:
                last = f"{method} {path}: the answer was cut off ({err})"
            except httpx.TransportError as err:
                last = f"{method} {path}: {type(err).__name__}: {err}"
            else:
                if response.status_code not in RETRY_STATUSES:
                    return response
                last = f"{method} {path} answered {response.status_code}"
                wait = retry_after_s(response.headers.get("Retry-After"))
            if attempt == self.max_attempts:
                break
            delay = min(self.max_backoff_s, wait) if wait is not None else backoff_s(self.backoff_s, attempt - 1, self.max_backoff_s)
            self.counts.retries += 1
            log.info("osv_retry", attempt=attempt, delay_s=delay, reason=last)
            self.sleep(delay)
        if "cut off" in last:
            raise OsvBadAnswer(f"{last}, {self.max_attempts} attempts")
        raise OsvUnavailable(f"{last} ({self.max_attempts} attempts)")

    @staticmethod
    def _raise_for_status(response: httpx.Response, what: str) -> None:
        if response.status_code >= 400:
            text = response.text[:200].strip()
            raise OsvBadAnswer(f"{what} answered {response.status_code}: {text}")

    @staticmethod
    def _json(response: httpx.Response, what: str) -> Any:
        try:
            return response.json()
        except ValueError as err:
            size = len(response.content)
            raise OsvBadAnswer(f"{what}: the answer is not valid JSON ({size} bytes; {err})") from err


def _parse_result(result: Any, query: PackageQuery) -> tuple[list[VulnRef], str | None]:
    if not isinstance(result, dict):
        raise OsvBadAnswer(f"a querybatch result for {_label(query)} is {type(result).__name__}, not an object")
    vulns = result.get("vulns") or []
    if not isinstance(vulns, list):
        raise OsvBadAnswer(f"`vulns` for {_label(query)} is not a list")
    refs = []
    for vuln in vulns:
        if not isinstance(vuln, dict) or not isinstance(vuln.get("id"), str):
            raise OsvBadAnswer(f"a vuln for {_label(query)} has no id: {str(vuln)[:80]}")
        refs.append(VulnRef(vuln["id"], str(vuln.get("modified", ""))))
    token = result.get("next_page_token")
    return refs, str(token) if token else None


def _label(query: PackageQuery) -> str:
    return f"{query.name} {query.version}" if query.version else f"{query.name} (all versions)"

