"""The OSV-compatible API: osv.dev's `POST /v1/query`, `POST /v1/querybatch` and `GET /v1/vulns/{id}`, with
osv.dev's request and response shapes, page tokens and errors (`{"code", "message"}`, gRPC's code 3 for a
query it refuses, 5 for an unknown id), answered from hubwatch's own records (feeds/osv). A client written
from osv.dev's API documentation points its base URL here and works unchanged.

Bodies are read here rather than by FastAPI, so that every refusal, a malformed purl, a batch over 1,000
queries, hostile JSON or a body over the limit, answers 400 in osv.dev's shape with the reason, never FastAPI's
422 list. The OpenAPI document declares the request bodies (`osv_components`) as FastAPI would have.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Depends, Path, Request, Response
from pydantic import BaseModel, Field, ValidationError
from pydantic.json_schema import models_json_schema
from starlette.concurrency import run_in_threadpool

from feeds.http.api_models import ErrorOut
from feeds.http.auth import require_read
from feeds.http.body_limit import BodyTooLarge
from feeds.http.params import base_url
from feeds.http.strict_json import HostileJSON, strict_loads
from feeds.osv.database import MAX_BATCH
from feeds.osv.queries import BatchIn, InvalidQuery, QueryIn, parse_json_query, parse_query, validation_message

INVALID_ARGUMENT = 3  # gRPC status codes, as osv.dev's JSON errors carry them
NOT_FOUND = 5
MAX_OSV_BODY_BYTES = 1 << 20  # a batch of 1,000 queries with purls, versions and page tokens is about 250 KB


class OsvError(BaseModel):
    """osv.dev's error body: a gRPC status code and a sentence."""

    code: int = Field(description="gRPC status: 3 (INVALID_ARGUMENT) for a refused query, 5 (NOT_FOUND) for an unknown id")
    message: str
    details: list[dict[str, Any]] = Field(default_factory=list)


class Vulnerability(BaseModel):
    """An OSV record (the OSV schema, https://ossf.github.io/osv-schema/): `id` and `modified` always there."""

    model_config = {"extra": "allow"}
    id: str
    modified: str


class VulnerabilityList(BaseModel):
    vulns: list[Vulnerability] = Field(default_factory=list, description="Absent when nothing matches")
    next_page_token: str | None = Field(default=None, description="Present when more records match: send it as `page_token`")


class VulnBrief(BaseModel):
    id: str
    modified: str


class BatchResult(BaseModel):
    vulns: list[VulnBrief] = Field(default_factory=list, description="Absent when nothing matches")
    next_page_token: str | None = None


class BatchResults(BaseModel):
    results: list[BatchResult] = Field(description="One per query, in the order of the queries")


class _Refused(Exception):
    def __init__(self, status: int, code: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.headers = status, code, message, headers


router = APIRouter(tags=["osv"], dependencies=[Depends(require_read)])
_ERRORS: dict[int | str, dict[str, Any]] = {400: {"model": OsvError, "description": "The query is refused; the message says why"},
                                            401: {"model": ErrorOut, "description": "This server's reads need a token"}}


def _request_body(name: str) -> dict[str, Any]:
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{name}"}}}}}


def osv_components() -> dict[str, Any]:
    """The request bodies' schemas, for the OpenAPI document's components (the routes read bodies themselves)."""
    _, top = models_json_schema([(QueryIn, "validation"), (BatchIn, "validation")], ref_template="#/components/schemas/{model}")
    return top["$defs"]


def _json(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    body = json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode()
    return Response(body, status_code=status, media_type="application/json", headers=headers)


def _refusal(err: _Refused) -> Response:
    return _json({"code": err.code, "message": err.message, "details": []}, err.status, err.headers)


async def _document(request: Request) -> Any:
    try:
        raw = await request.body()
    except BodyTooLarge as err:
        raise _Refused(400, INVALID_ARGUMENT, f"The body is too large: over {MAX_OSV_BODY_BYTES} bytes "
                       f"(send at most {MAX_BATCH} queries a batch)", headers={"Connection": "close"}) from err
    try:
        return strict_loads(raw)
    except HostileJSON as err:
        raise _Refused(400, INVALID_ARGUMENT, f"Invalid JSON: {err}") from err


def _hub_url(request: Request) -> str:
    return request.app.state.services.options.hub_url


def _pages_url(request: Request) -> str:
    return base_url(request).rstrip("/")


@router.post("/v1/query", response_model=None, responses={200: {"model": VulnerabilityList}, **_ERRORS},
             openapi_extra=_request_body("QueryIn"), operation_id="osv_query",
             summary="OSV: the records affecting one model revision (purl, purl + version, or commit), a page at a time")
async def osv_query(request: Request) -> Response:
    try:
        query = parse_json_query(await _document(request), _hub_url(request))
    except _Refused as err:
        return _refusal(err)
    except InvalidQuery as err:
        return _refusal(_Refused(400, INVALID_ARGUMENT, str(err)))
    osv = request.app.state.services.osv
    return _json(await run_in_threadpool(osv.query, query, _pages_url(request)))


@router.post("/v1/querybatch", response_model=None, responses={200: {"model": BatchResults}, **_ERRORS},
             openapi_extra=_request_body("BatchIn"), operation_id="osv_querybatch",
             summary=f"OSV: many queries at once (at most {MAX_BATCH}); ids and modified times only, per query in order")
async def osv_querybatch(request: Request) -> Response:
    try:
        document = await _document(request)
        queries = _batch(document, _hub_url(request))
    except _Refused as err:
        return _refusal(err)
    osv = request.app.state.services.osv
    return _json(await run_in_threadpool(osv.querybatch, queries))


def _batch(document: Any, hub_url: str) -> list[Any]:
    if isinstance(document, dict) and isinstance(document.get("queries"), list) and len(document["queries"]) > MAX_BATCH:
        raise _Refused(400, INVALID_ARGUMENT, f"Too many queries: {len(document['queries'])} (at most {MAX_BATCH} a batch)")
    try:
        batch = BatchIn.model_validate(document)
    except ValidationError as err:
        raise _Refused(400, INVALID_ARGUMENT, validation_message(err)) from err
    queries = []
    for i, query in enumerate(batch.queries):  # validated above: only osv.dev's own refusals are left to find
        try:
            queries.append(parse_query(query, hub_url))
        except InvalidQuery as err:
            raise _Refused(400, INVALID_ARGUMENT, f"queries.{i}: {err}") from err
    return queries


@router.get("/v1/vulns/{vuln_id}", response_model=None, responses={200: {"model": Vulnerability}, 404: {"model": OsvError}, **_ERRORS},
            operation_id="osv_vuln", summary="OSV: one record by id (withdrawn ones too)")
async def osv_vuln(request: Request, vuln_id: str = Path(description="An OSV id: x_HUBWATCH-...")) -> Response:
    osv = request.app.state.services.osv
    record = await run_in_threadpool(osv.vuln, vuln_id, _pages_url(request))
    if record is None:
        return _refusal(_Refused(404, NOT_FOUND, f"Bug not found: hubwatch has no record {vuln_id[:100]!r}"))
    return _json(record)

