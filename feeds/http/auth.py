"""Bearer tokens: one for writes (always required), one for reads (when the operator closes reading).

Tokens are compared in constant time. Reads also accept `?token=`, so a feed reader that cannot send
headers can follow a private feed; writes take the header only. The OpenAPI document declares security
as this server enforces it (`declare_security`): with reads open, reads declare none.
"""

from __future__ import annotations

import hmac
from typing import Annotated, Any

from fastapi import Depends, HTTPException, Request
from fastapi.security import APIKeyQuery, HTTPAuthorizationCredentials, HTTPBearer

_bearer = HTTPBearer(auto_error=False, description="The API token ([server] api_token_env) or, for reads, the read token.")
_query_token = APIKeyQuery(name="token", auto_error=False, description="The read token, for clients that cannot send headers.")
CHALLENGE = {"WWW-Authenticate": 'Bearer realm="hubwatch"'}


def same_secret(given: str | None, expected: str | None) -> bool:
    """Constant-time equality; never true when either side is missing or empty."""
    if not given or not expected:
        return False
    return hmac.compare_digest(given.encode("utf-8"), expected.encode("utf-8"))


def require_read(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    token: Annotated[str | None, Depends(_query_token)],
) -> None:
    """Let the request through when reading is open, or when it carries the read or API token."""
    options = request.app.state.services.options
    if not options.read_token:
        return
    given = credentials.credentials if credentials else token
    if same_secret(given, options.read_token) or same_secret(given, options.api_token):
        return
    raise HTTPException(
        401, "reading needs a token: send 'Authorization: Bearer <token>' or add ?token=<token>", headers=CHALLENGE
    )


def require_write(request: Request, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]) -> None:
    """Changing state always needs the API token, sent as a bearer token."""
    options = request.app.state.services.options
    if not options.api_token:
        raise HTTPException(403, "writes are disabled on this server: set [server] api_token_env and that variable")
    if credentials is None or not same_secret(credentials.credentials, options.api_token):
        raise HTTPException(401, "this endpoint needs the API token: send 'Authorization: Bearer <token>'", headers=CHALLENGE)


def declare_security(document: dict[str, Any], reads_open: bool) -> dict[str, Any]:
    """The OpenAPI document with each operation's security as enforced. FastAPI declares every scheme a
    route's token check reads, so a read (`require_read`, the only check that takes `?token=`) declares
    the bearer and query token; with reads open (no read token, the default) it needs neither, so its
    operation declares `security: []` and no 401 answer, and the query-token scheme, then unused, leaves
    `components`. Writes declare the bearer token either way."""
    if not reads_open:
        return document
    query_scheme = _query_token.scheme_name
    for item in document.get("paths", {}).values():
        for operation in item.values():
            if isinstance(operation, dict) and any(query_scheme in r for r in operation.get("security", [])):
                operation["security"] = []
                operation.get("responses", {}).pop("401", None)
    document.get("components", {}).get("securitySchemes", {}).pop(query_scheme, None)
    return document
