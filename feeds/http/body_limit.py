"""A ceiling on every request body, declared or chunked: the body is counted as it streams in and the
request stops with 413 the moment it passes the limit, so a client cannot make the server hold more
than the limit of it, whatever `Transfer-Encoding` says.

Why our own middleware rather than Starlette's `max_body_size`: that one answers a plain-text 413 in
place of any response (a 401 too) when the declared length is over, and leaves the connection open, so
uvicorn keeps reading (and dropping) the rest of a chunked body. Here the limit is raised from
`receive` as an HTTPException, so each route answers it in its own shape (the Hub webhook's
`HookAnswer`, the API's `{"detail"}`) after its own earlier checks, and any response that leaves part
of the body unread says `Connection: close`: the server stops reading there. A path prefix may have a
limit of its own (`prefixes`): the OSV API's batches of 1,000 queries under /v1/ (its routes answer the
limit in osv.dev's shape, 400).
"""

from __future__ import annotations

from collections.abc import Mapping

from fastapi import HTTPException
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

MAX_BODY_BYTES = 256 * 1024  # the Hub's payloads are a few KB; the API's largest body (a subscription) tens


class BodyTooLarge(HTTPException):
    """The request body passed the limit (raised from `receive`, before the rest is read)."""

    def __init__(self, max_bytes: int) -> None:
        super().__init__(413, f"too large: the body is over {max_bytes} bytes", headers={"Connection": "close"})


class BodyLimitMiddleware:
    """Counts each request's body as the app reads it; raises `BodyTooLarge` once past `max_bytes`
    (at the first read when the declared Content-Length is already over)."""

    def __init__(self, app: ASGIApp, max_bytes: int = MAX_BODY_BYTES, prefixes: Mapping[str, int] | None = None) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.prefixes = dict(prefixes or {})  # path prefix -> its own limit (the OSV API's batches: /v1/)

    def limit_for(self, path: str) -> int:
        return next((limit for prefix, limit in self.prefixes.items() if path.startswith(prefix)), self.max_bytes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        max_bytes = self.limit_for(scope.get("path", ""))
        declared = _declared_length(headers)
        pending = "chunked" in headers.get("transfer-encoding", "").lower() or bool(declared)
        received = 0

        async def limited_receive() -> Message:
            nonlocal received, pending
            if declared is not None and declared > max_bytes:
                raise BodyTooLarge(max_bytes)
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > max_bytes:
                    raise BodyTooLarge(max_bytes)
                pending = pending and bool(message.get("more_body", False))
            return message

        async def closing_send(message: Message) -> None:
            if message["type"] == "http.response.start" and pending:
                raw = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"connection"]
                message = {**message, "headers": [*raw, (b"connection", b"close")]}
            await send(message)

        await self.app(scope, limited_receive, closing_send)


def _declared_length(headers: Headers) -> int | None:
    value = headers.get("content-length", "").strip()
    return int(value) if value.isdigit() else None
