"""JSON from strangers: one parse that refuses, with a reason, what `json.loads` lets through or fails on
with something other than a ValueError: bytes that are not UTF-8, nesting deep enough to exhaust the
stack, numbers too long to convert, NaN and Infinity, duplicate keys (which one wins is the parser's
choice, so the sender's meaning is unclear), and lone surrogates (text no response can encode).
`StrictJSONRoute` gives API routes the same parse for their bodies."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import HTTPException, Request, Response
from fastapi.routing import APIRoute


class HostileJSON(ValueError):
    """The body is not JSON a sender acting in good faith would write; the message says why."""


def strict_loads(raw: bytes) -> Any:
    """The parsed document, or HostileJSON naming what is wrong with it."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise HostileJSON("the body is not UTF-8") from err
    try:
        document = json.loads(text, object_pairs_hook=_unique_keys, parse_constant=_no_constant,
                              parse_int=_integer, parse_float=_finite)
    except RecursionError as err:
        raise HostileJSON("the body is nested too deeply") from err
    except HostileJSON:
        raise
    except ValueError as err:
        raise HostileJSON("the body is not JSON") from err
    try:
        json.dumps(document, ensure_ascii=False).encode("utf-8")
    except RecursionError as err:
        raise HostileJSON("the body is nested too deeply") from err
    except UnicodeEncodeError as err:
        raise HostileJSON("the body holds a lone surrogate (\\ud800-\\udfff), which is not text") from err
    return document


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    document = dict(pairs)
    if len(document) != len(pairs):
        raise HostileJSON("the body repeats a key in one object")
    return document


def _integer(digits: str) -> int:
    try:
        return int(digits)
    except ValueError as err:  # Python refuses to convert thousands of digits (int_max_str_digits)
        raise HostileJSON(f"the body holds a number of {len(digits)} digits") from err


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise HostileJSON(f"the body holds a number out of range ({text[:20]})")
    return value


def _no_constant(name: str) -> Any:
    raise HostileJSON(f"the body holds {name}, which JSON does not have")


class StrictJSONRequest(Request):
    """A request whose JSON body is parsed by `strict_loads`: hostile JSON answers 400 with the reason."""

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            try:
                self._json = strict_loads(await self.body())
            except HostileJSON as err:
                raise HTTPException(400, f"malformed: {err}") from err
        return self._json


class StrictJSONRoute(APIRoute):
    """A route that reads its JSON body strictly (FastAPI's documented custom-request extension point)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def strict_handler(request: Request) -> Response:
            return await handler(StrictJSONRequest(request.scope, request.receive))

        return strict_handler
