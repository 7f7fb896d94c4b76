"""An OSV fake: real HTTP on loopback in a thread, serving real advisory records (`osv_data/`), for the
tests, the benchmark and `hubwatch demo`.

It answers as api.osv.dev does: `POST /v1/querybatch` (at most 1,000 queries; per query the ids and
`modified` of the live records affecting the package version, or of every record of the package when no
version is given; `next_page_token` past `page_size`), `POST /v1/query`, `GET /v1/vulns/{id}` (withdrawn
records included, 404 otherwise). Matching is its own small implementation (the `versions` lists and
ECOSYSTEM ranges), not hubwatch's, so the two can disagree and a test can see it.

Faults for the next `times` requests whose path matches: `inject("status", status=503)`, `"malformed"`
(200, not JSON), `"body"` (200 with the JSON `body=` given), `"cut_json"` (200, JSON cut in half),
`"truncated"` (Content-Length promises more than is sent), `"slow"` (answers after `delay_s`; `stop()`
releases it), `"page_forever"` (every querybatch result gets a fresh next_page_token), `"same_token"` (the
same token every time). Requests are recorded.
"""

from __future__ import annotations

import base64
import copy
import json
import re
import socket
import threading
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from tracker.standins.loopback import KeepAliveHandler, LoopbackServer

DATA_DIR = Path(__file__).resolve().parent / "osv_data"
MAX_QUERIES = 1000
FAULT_KINDS = ("status", "body", "malformed", "cut_json", "truncated", "slow", "page_forever", "same_token")


def bundled_records(directory: Path = DATA_DIR) -> list[dict[str, Any]]:
    """The real records shipped with hubwatch (see osv_data/SOURCES.md)."""
    return [json.loads(p.read_text(encoding="utf-8")) for p in sorted(directory.glob("*.json"))]


@dataclass(frozen=True)
class OsvRequest:
    method: str
    path: str
    queries: int  # querybatch: how many queries the request carried
    status: int


@dataclass
class _Fault:
    kind: str
    path: re.Pattern[str]
    remaining: int
    params: dict[str, Any] = field(default_factory=dict)


@dataclass
class _Answer:
    status: int
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)
    declared_length: int | None = None  # a Content-Length larger than the body: the connection is cut


class OsvFake:
    def __init__(
        self,
        records: Iterable[Mapping[str, Any]] | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        page_size: int = 1000,
    ) -> None:
        self.host, self.port, self.page_size = host, port, page_size
        self._records: dict[str, dict[str, Any]] = {}
        for record in bundled_records() if records is None else records:
            self.put(record)
        self._lock = threading.Lock()
        self._faults: list[_Fault] = []
        self._log: list[OsvRequest] = []
        self._released = threading.Event()
        self._http = LoopbackServer(_Handler, self, "osv-fake", host, port)
        self._token_serial = 0

    # -- life cycle
    def start(self) -> OsvFake:
        self._released.clear()
        self.port = self._http.start()
        return self

    def stop(self) -> None:
        self._released.set()  # a request held "slow" returns at once
        self._http.stop()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}:{self.port}"

    # -- records
    def put(self, record: Mapping[str, Any]) -> None:
        """Add or replace a record (a new `modified` is what a real update looks like)."""
        self._records[str(record["id"])] = copy.deepcopy(dict(record))

    def record(self, vuln_id: str) -> dict[str, Any]:
        return copy.deepcopy(self._records[vuln_id])

    def modify(self, vuln_id: str, modified: str, **changes: Any) -> None:
        """Update a record as its database would: new fields, new `modified`."""
        record = self.record(vuln_id)
        record.update(changes, modified=modified)
        self.put(record)

    def withdraw(self, vuln_id: str, when: str) -> None:
        self.modify(vuln_id, when, withdrawn=when)

    def ids(self) -> list[str]:
        return sorted(self._records)

    # -- requests and faults
    @property
    def requests(self) -> list[OsvRequest]:
        with self._lock:
            return list(self._log)

    def counts(self) -> Counter[str]:
        """Requests by endpoint: "querybatch", "vulns", "query"."""
        return Counter(_endpoint(r.path) for r in self.requests)

    def reset_requests(self) -> None:
        with self._lock:
            self._log.clear()

    def inject(self, kind: str, *, path: str = ".", times: int = 1, **params: Any) -> None:
        if kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault {kind!r}; one of {', '.join(FAULT_KINDS)}")
        with self._lock:
            self._faults.append(_Fault(kind, re.compile(path), times, params))

    def clear_faults(self) -> None:
        with self._lock:
            self._faults.clear()

    def _take_fault(self, path: str) -> _Fault | None:
        with self._lock:
            for fault in self._faults:
                if fault.path.search(path):
                    fault.remaining -= 1
                    if fault.remaining <= 0:
                        self._faults.remove(fault)
                    return fault
        return None

    def _next_token(self) -> str:
        with self._lock:
            self._token_serial += 1
            return f"forever-{self._token_serial}"

    # -- answering
    def answer(self, method: str, path: str, body: bytes) -> tuple[_Answer, int]:
        fault = self._take_fault(path)
        if fault is not None and fault.kind == "slow":
            self._released.wait(float(fault.params.get("delay_s", 5.0)))
            fault = None
        if fault is not None and fault.kind == "status":
            status = int(fault.params.get("status", 503))
            headers = {"Retry-After": str(fault.params["retry_after"])} if "retry_after" in fault.params else {}
            return _json(status, {"code": 14, "message": "injected"}, headers), 0
        if fault is not None and fault.kind == "body":
            return _json(200, fault.params.get("body")), 0
        if fault is not None and fault.kind == "malformed":
            return _Answer(200, b"<html><body>502 Bad Gateway</body></html>", {"Content-Type": "text/html"}), 0
        try:
            answer, queries = self._route(method, path, body, fault)
        except _ApiError as err:
            return _json(err.status, {"code": 3, "message": err.message}), 0
        if fault is not None and fault.kind == "cut_json":
            answer.body = answer.body[: max(1, len(answer.body) // 2)]
        if fault is not None and fault.kind == "truncated":
            answer.declared_length = len(answer.body)
            answer.body = answer.body[: max(1, len(answer.body) // 2)]
        return answer, queries

    def _route(self, method: str, path: str, body: bytes, fault: _Fault | None) -> tuple[_Answer, int]:
        if method == "GET" and path.startswith("/v1/vulns/"):
            vuln_id = path.removeprefix("/v1/vulns/")
            record = self._records.get(vuln_id)
            if record is None:
                raise _ApiError(404, "Bug not found.")
            return _json(200, record), 0
        if method == "POST" and path == "/v1/querybatch":
            queries = _body(body).get("queries")
            if not isinstance(queries, list):
                raise _ApiError(400, "queries must be a list")
            if len(queries) > MAX_QUERIES:
                raise _ApiError(400, f"Too many queries: {len(queries)} (at most {MAX_QUERIES})")
            results = []
            for query in queries:
                refs, token = self._match(query, fault)
                result: dict[str, Any] = {"vulns": refs} if refs else {}
                if token:
                    result["next_page_token"] = token
                results.append(result)
            return _json(200, {"results": results}), len(queries)
        if method == "POST" and path == "/v1/query":
            query = _body(body)
            refs, token = self._match(query, fault)
            full = [self._records[r["id"]] for r in refs]
            return _json(200, {"vulns": full, **({"next_page_token": token} if token else {})}), 1
        raise _ApiError(404, "Not Found")

    def _match(self, query: Any, fault: _Fault | None) -> tuple[list[dict[str, str]], str | None]:
        if not isinstance(query, dict) or not isinstance(query.get("package"), dict):
            raise _ApiError(400, "a query needs a package")
        name = canonicalize_name(str(query["package"].get("name", "")))
        ecosystem = str(query["package"].get("ecosystem", ""))
        version = query.get("version")
        hits = [
            {"id": r["id"], "modified": r["modified"]}
            for r in sorted(self._records.values(), key=lambda r: r["id"])
            if not r.get("withdrawn") and _affects(r, ecosystem, name, version)
        ]
        offset = _offset(query.get("page_token"))
        page = hits[offset : offset + self.page_size]
        token = _token(offset + self.page_size) if offset + self.page_size < len(hits) else None
        if fault is not None and fault.kind == "page_forever":
            token = self._next_token()
        if fault is not None and fault.kind == "same_token":
            token = "the-same-token"
        return page, token


class _ApiError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


def _json(status: int, data: Any, headers: dict[str, str] | None = None) -> _Answer:
    return _Answer(status, json.dumps(data).encode(), {"Content-Type": "application/json", **(headers or {})})


def _body(body: bytes) -> dict[str, Any]:
    try:
        data = json.loads(body or b"{}")
    except ValueError as err:
        raise _ApiError(400, f"invalid JSON: {err}") from err
    if not isinstance(data, dict):
        raise _ApiError(400, "the body must be an object")
    return data


def _endpoint(path: str) -> str:
    if path.startswith("/v1/vulns/"):
        return "vulns"
    return path.removeprefix("/v1/")


def _token(offset: int) -> str:
    return base64.urlsafe_b64encode(f"offset:{offset}".encode()).decode()


def _offset(token: Any) -> int:
    if not token:
        return 0
    try:
        text = base64.urlsafe_b64decode(str(token).encode()).decode()
        return int(text.removeprefix("offset:"))
    except (ValueError, UnicodeDecodeError):
        return 0


def _affects(record: Mapping[str, Any], ecosystem: str, name: str, version: Any) -> bool:
    for affected in record.get("affected") or ():
        package = affected.get("package") or {}
        if package.get("ecosystem") != ecosystem or canonicalize_name(str(package.get("name", ""))) != name:
            continue
        if version is None:
            return True
        if str(version) in {str(v) for v in affected.get("versions") or ()}:
            return True
        if any(_in_ecosystem_range(r, str(version)) for r in affected.get("ranges") or ()):
            return True
    return False


def _in_ecosystem_range(rng: Mapping[str, Any], version: str) -> bool:
    """Simple introduced/fixed/last_affected intervals, in order of appearance."""
    if rng.get("type") != "ECOSYSTEM":
        return False
    try:
        v = Version(version)
    except InvalidVersion:
        return False
    inside = False
    for event in rng.get("events") or ():
        try:
            if "introduced" in event:
                inside = inside or event["introduced"] == "0" or v >= Version(event["introduced"])
            elif (("fixed" in event and inside and v >= Version(event["fixed"]))
                  or ("last_affected" in event and inside and v > Version(event["last_affected"]))):
                inside = False
        except InvalidVersion:
            continue
    return inside


class _Handler(KeepAliveHandler):
    @property
    def fake(self) -> OsvFake:
        return self.owner

    def _handle(self, method: str) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        path = self.path.split("?", 1)[0]
        answer, queries = self.fake.answer(method, path, body)
        with self.fake._lock:
            self.fake._log.append(OsvRequest(method, path, queries, answer.status))
        try:
            self.send_response(answer.status)
            for name, value in answer.headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(answer.declared_length or len(answer.body)))
            self.end_headers()
            self.wfile.write(answer.body)
            if answer.declared_length is not None:
                self.wfile.flush()
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
        except (BrokenPipeError, ConnectionResetError, OSError):
            self.close_connection = True
