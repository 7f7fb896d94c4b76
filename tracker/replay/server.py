"""The Hub replay server: recorded repo histories (FORMAT.md) served over real HTTP on loopback.

The unmodified huggingface_hub client talks to it (`HfApi(endpoint=server.endpoint)`,
`hf_hub_download(..., endpoint=server.endpoint)`). Each repo's branch shows the first n recorded commits
(all by default); `set_head` and `advance` move it, which is how tests make "new commits" appear.

Which client calls retry (huggingface_hub 2.4, read from its sources), for choosing injected faults:

- No retry at all, the first error is raised: `model_info` / `repo_info` / `repo_exists` /
  `revision_exists`, `list_repo_refs`, `get_paths_info`, `auth_check`, `parse_safetensors_file_metadata`
  (plain GETs with a Range), `file_exists` and `get_hf_file_metadata` (one HEAD on /resolve).
- `list_repo_commits`, `list_repo_tree`, `list_repo_files` (every page, through `http_backoff`): retry on
  408, 429, 500, 502, 503, 504 and network errors, up to 5 retries, sleeping 1, 2, 4, 8, 8 s; a 429 whose
  `RateLimit` header says `r=0;t=N` (or any retried answer with `Retry-After: N`) sleeps N+1 s instead.
  So inject faults on them only to test a slow path, and with `t=0` on 429s (the default here).
- `hf_hub_download`: the HEAD is not retried, but when it fails with one of those statuses (and no cached
  copy exists) the client asks again with the backoff above: one injected 5xx/429 on /resolve costs one
  extra request and no sleep, two cost a 1 s sleep. A HEAD that keeps failing ends in
  `LocalEntryNotFoundError` (after 23 s), not `HfHubHTTPError`. The GET of the bytes retries only
  408/429 (same waits); a 5xx on it is raised at once.

Errors are answered like the Hub: `X-Error-Code` (RepoNotFound, RevisionNotFound, EntryNotFound,
GatedRepo) and `X-Error-Message`, which the client maps to its typed errors. An unknown or private repo
is 401 for anonymous requests and 404 otherwise. With `token` set, only `Authorization: Bearer <token>`
is accepted (any other token is a 401 "Invalid credentials"); with `token=None` any bearer token counts
as a user with access. Gated repos (repo.json "gated") refuse anonymous file reads with 401 GatedRepo;
their info, refs, commits and trees stay readable, as on the Hub.

`GET /api/models` is the listing `list_models` reads: `author`, `sort` (lastModified, createdAt, id),
`direction` (-1 by default with a sort; 1), `limit` (a page is `list_page`, 1,000 like the Hub's),
`expand` / `expand[]`, and an opaque `cursor` (the sort key of the previous page's last entry) in the
`Link: <...>; rel="next"` header; private repos are listed only for a token. A head moved while the
server runs (`advance`, `set_head`, `add_repo`) is last modified "now" (strictly after every earlier
move), in the listing and in model info. `fault_listing` makes pages repeat or skip entries or the
cursor loop; `list_with_sha` makes the listing claim a sha model info does not confirm.

The client's background `GET /api/agent-harnesses` is answered 404 and never recorded; neither are the
admin routes under `/_replay/` (see `_admin`).
"""

from __future__ import annotations

import base64
import html
import json
import re
import threading
import time
import traceback
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlencode, urlsplit

from tracker.fakes.loopback import KeepAliveHandler, LoopbackServer
from tracker.replay.history import (
    Blob,
    LfsBlob,
    Node,
    ReplayCommit,
    RepoHistory,
    load_roots,
    parameter_counts,
)

BUNDLED_ROOT = Path(__file__).resolve().parent / "histories"

COMMITS_PAGE = 50
LIST_PAGE = 1000  # the Hub's page of /api/models (and its largest `limit`)
LIST_FAULTS = ("repeat", "skip", "loop")
LIST_SORTS = {"lastModified", "createdAt", "id"}
LIST_DEFAULT_KEYS = "id likes trendingScore private downloads tags pipeline_tag library_name createdAt".split()
TREE_PAGE, TREE_PAGE_EXPANDED = 1000, 50
EXPAND_KEYS = frozenset(
    "author baseModels cardData childrenModelCount config createdAt disabled downloads downloadsAllTime "
    "evalResults gated gguf inference inferenceProviderMapping lastModified library_name likes mask_token "
    "model-index pipeline_tag private resourceGroup safetensors sha siblings spaces tags transformersInfo "
    "trendingScore usedStorage widgetData".split()
)
DEFAULT_KEYS = (
    "author sha lastModified private disabled gated downloads likes tags pipeline_tag library_name "
    "createdAt cardData config siblings spaces safetensors usedStorage".split()
)
API_ROUTE = re.compile(r"^/api/models/([^/]+)/([^/]+)(/.*)?$")
RESOLVE_ROUTE = re.compile(r"^/([^/]+)/([^/]+)/resolve/([^/]+)/(.+)$")
RANGE = re.compile(r"\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*")
RATE_LIMIT_HEADERS = {"RateLimit": '"{kind}";r=0;t=0', "RateLimit-Policy": '"fixed window";"{kind}";q=500;w=300'}
FAULT_MESSAGES = {429: "You have exceeded our rate limit. Retry later.", 500: "Internal Error"}


@dataclass(frozen=True)
class RecordedRequest:
    """One request the server answered (admin routes and agent-harness look-ups are not recorded)."""

    method: str
    path: str  # percent-decoded, without the query
    query: str  # raw query string
    status: int
    range: str | None = None  # the Range header, if any


@dataclass
class _Fault:
    status: int
    path: re.Pattern[str]
    method: str | None
    remaining: int
    headers: dict[str, str]
    silent_s: float | None = None  # no answer: the connection is closed after this many seconds


@dataclass
class _Response:
    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    blob: Blob | None = None  # when set, bytes [start, stop) of the blob are the body
    start: int = 0
    stop: int = 0
    silent_s: float | None = None  # no answer at all: close the connection after this many seconds


class _HubError(Exception):
    """An error answered the way the Hub does: status, X-Error-Code, X-Error-Message, JSON body."""

    def __init__(self, status: int, message: str, code: str | None = None, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.code, self.headers = status, message, code, headers or {}

    def response(self) -> _Response:
        headers = {**self.headers, "X-Error-Message": self.message.encode("ascii", "replace").decode()}
        if self.code:
            headers["X-Error-Code"] = self.code
        return _json(self.status, {"error": self.message}, headers)


def _json(status: int, data: Any, headers: dict[str, str] | None = None) -> _Response:
    body = json.dumps(data, default=str).encode()
    return _Response(status, {"Content-Type": "application/json; charset=utf-8", **(headers or {})}, body)


def _iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _flag(values: list[str] | None) -> bool:
    return bool(values) and values[-1].lower() in ("true", "1")


def _int_param(query: dict[str, list[str]], name: str, default: int) -> int:
    try:
        return int(query[name][-1]) if name in query else default
    except ValueError:
        raise _HubError(400, f"Invalid {name}: {query[name][-1]!r}") from None


class ReplayServer:
    """Serves the repos found under `roots` (later roots override earlier ones for the same repo id)."""

    def __init__(
        self,
        roots: Path | str | Iterable[Path | str] = BUNDLED_ROOT,
        host: str = "127.0.0.1",
        port: int = 0,
        token: str | None = None,
    ) -> None:
        root_list = [roots] if isinstance(roots, (str, Path)) else list(roots)
        self._repos = load_roots([Path(r) for r in root_list])
        self._heads = {repo_id: len(repo.commits) for repo_id, repo in self._repos.items()}
        self.host, self.port, self.token = host, port, token
        self._lock = threading.Lock()
        self._requests: list[RecordedRequest] = []
        self._faults: list[_Fault] = []
        self._moved_at: dict[str, datetime] = {}  # when a head last moved while served (the listing's clock)
        self._listed_sha: dict[str, str] = {}  # a listing that claims another sha than the repo's own
        self._list_fault: tuple[str, int] | None = None
        self._ratelimit: dict[str, str] = {}  # headers added to every answer (send_ratelimit)
        self.list_page = LIST_PAGE  # entries per /api/models page when the client sends no limit
        self._http = LoopbackServer(_Handler, self, "hub-replay", host, port)

    def add_repo(self, history: RepoHistory) -> None:
        """Serve one more repo (built in memory, e.g. `synthetic_history`), all its commits shown. Added
        while the server runs, it is a repo created now: the listing shows it as the newest."""
        with self._lock:
            self._repos[history.repo_id] = history
            self._heads[history.repo_id] = len(history.commits)
            self._touch(history.repo_id)

    def send_ratelimit(self, remaining: int | None, reset_s: int = 300, limit: int = 1000) -> None:
        """Answer every request with `RateLimit: "api";r=REMAINING;t=RESET_S` and a policy of `limit` per
        5 minutes, as the Hub does (None: no such headers)."""
        with self._lock:
            self._ratelimit = {} if remaining is None else {
                "RateLimit": f'"api";r={remaining};t={reset_s}',
                "RateLimit-Policy": f'"fixed window";"api";q={limit};w=300',
            }

    # -- life cycle
    def start(self) -> ReplayServer:
        if self._http.running:
            raise RuntimeError("replay server already started")
        self.port = self._http.start()
        return self

    def stop(self) -> None:
        self._http.stop()

    def __enter__(self) -> ReplayServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def endpoint(self) -> str:
        host = "127.0.0.1" if self.host in ("", "0.0.0.0") else self.host
        return f"http://{host}:{self.port}"

    # -- histories and heads
    def repo_ids(self) -> list[str]:
        return sorted(self._repos)

    def repo(self, repo_id: str) -> RepoHistory:
        return self._repos[repo_id]

    def commits(self, repo_id: str) -> list[ReplayCommit]:
        """Every recorded commit of the repo, oldest first (revealed or not)."""
        return list(self._repos[repo_id].commits)

    def set_head(self, repo_id: str, n: int) -> None:
        """Show the first n commits: the branch head becomes commit n-1. With n=0 the repo does not exist yet."""
        if not 0 <= n <= len(self._repos[repo_id].commits):
            raise ValueError(f"{repo_id} has {len(self._repos[repo_id].commits)} commits, not {n}")
        with self._lock:
            self._heads[repo_id] = n
            self._touch(repo_id)

    def advance(self, repo_id: str) -> bool:
        """Reveal one more commit; False when all are shown."""
        with self._lock:
            if self._heads[repo_id] >= len(self._repos[repo_id].commits):
                return False
            self._heads[repo_id] += 1
            self._touch(repo_id)
            return True

    def _touch(self, repo_id: str) -> None:
        """The head moved now: the listing (and model info) report now as its lastModified, strictly after
        every earlier move, as the Hub's listing does (recorded commit dates are in the past). Before the
        server starts, heads set are the recorded state: their commit dates stand."""
        if not self._http.running:
            return
        latest = max(self._moved_at.values(), default=None)
        now = datetime.now(UTC).replace(microsecond=datetime.now(UTC).microsecond // 1000 * 1000)
        if latest is not None and now <= latest:
            now = latest + timedelta(milliseconds=1)
        self._moved_at[repo_id] = now
        self._listed_sha.pop(repo_id, None)

    def last_modified(self, repo_id: str) -> datetime:
        """The lastModified the listing shows for the repo's head."""
        found = self._visible(repo_id)
        if found is None or found[1] == 0:
            raise LookupError(f"{repo_id} has no commit shown")
        with self._lock:
            return self._last_modified(found[0], found[0].commits[found[1] - 1])

    def _last_modified(self, repo: RepoHistory, commit: ReplayCommit) -> datetime:
        moved = self._moved_at.get(repo.repo_id)
        return moved if moved is not None and moved > commit.date else commit.date

    # -- listing faults
    def list_with_sha(self, repo_id: str, sha: str) -> None:
        """The listing shows `sha` for the repo (its model info still tells the truth) until its head moves."""
        with self._lock:
            self._listed_sha[repo_id] = sha

    def fault_listing(self, kind: str | None, n: int = 1) -> None:
        """Misbehave on /api/models pages after the first: "repeat" starts each next page n entries early
        (entries appear twice), "skip" starts it n entries late (entries are never listed), "loop" makes
        every next link point back to the first page (a cursor that never ends). None: behave."""
        if kind is not None and kind not in LIST_FAULTS:
            raise ValueError(f"listing fault must be one of {', '.join(LIST_FAULTS)}, not {kind!r}")
        with self._lock:
            self._list_fault = (kind, n) if kind else None

    def _listing(self, anonymous: bool, author: str | None) -> list[tuple[RepoHistory, ReplayCommit, datetime, str]]:
        """The models a listing shows: (repo, head commit, lastModified, listed sha)."""
        with self._lock:
            out = []
            for repo_id, repo in self._repos.items():
                n = self._heads[repo_id]
                if n == 0 or (repo.private and anonymous) or (author and repo_id.split("/")[0] != author):
                    continue
                commit = repo.commits[n - 1]
                out.append((repo, commit, self._last_modified(repo, commit), self._listed_sha.get(repo_id, commit.sha)))
            return out

    # -- life cycle
    def head_count(self, repo_id: str) -> int:
        with self._lock:
            return self._heads[repo_id]

    def head_sha(self, repo_id: str) -> str:
        n = self.head_count(repo_id)
        if n == 0:
            raise LookupError(f"{repo_id} has no commit shown")
        return self._repos[repo_id].commits[n - 1].sha

    # -- request log and faults
    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    def reset_requests(self) -> None:
        with self._lock:
            self._requests.clear()

    def count_requests(self) -> int:
        with self._lock:
            return len(self._requests)

    def inject(
        self,
        status: int,
        *,
        path: str,
        method: str | None = None,
        times: int = 1,
        headers: dict[str, str] | None = None,
    ) -> None:
        """Answer the next `times` requests whose decoded path matches regex `path` (re.search) with `status`.

        A 429 carries `RateLimit: "api";r=0;t=0` and a `RateLimit-Policy` ("resolvers" for /resolve/ paths);
        `headers` adds to or overrides them.
        """
        fault = _Fault(status, re.compile(path), method.upper() if method else None, times, dict(headers or {}))
        with self._lock:
            self._faults.append(fault)

    def inject_silence(self, *, path: str, method: str | None = None, times: int = 1, after_s: float = 0.0) -> None:
        """Answer the next `times` matching requests with nothing: the connection is closed after `after_s`
        seconds (0: at once, a dropped connection; longer than the client's timeout: a time-out). These
        requests are recorded with status 0."""
        fault = _Fault(0, re.compile(path), method.upper() if method else None, times, {}, silent_s=after_s)
        with self._lock:
            self._faults.append(fault)

    def clear_faults(self) -> None:
        with self._lock:
            self._faults.clear()

    def _take_fault(self, method: str, path: str) -> _Response | None:
        with self._lock:
            for fault in self._faults:
                if fault.path.search(path) and fault.method in (None, method):
                    fault.remaining -= 1
                    if fault.remaining <= 0:
                        self._faults.remove(fault)
                    break
            else:
                return None
        if fault.silent_s is not None:
            return _Response(0, silent_s=fault.silent_s)
        headers = {}
        if fault.status == 429:
            kind = "resolvers" if "/resolve/" in path else "api"
            headers = {k: v.format(kind=kind) for k, v in RATE_LIMIT_HEADERS.items()}
        message = FAULT_MESSAGES.get(fault.status, "Injected fault" if fault.status < 500 else "Internal Error")
        return _HubError(fault.status, message, headers={**headers, **fault.headers}).response()

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self._requests.append(request)

    def _visible(self, repo_id: str) -> tuple[RepoHistory, int] | None:
        with self._lock:
            repo = self._repos.get(repo_id)
            return (repo, self._heads[repo_id]) if repo is not None else None

    # -- admin routes, for a server in another process
    def _admin(self, method: str, path: str, query: dict[str, list[str]]) -> _Response:
        """POST /_replay/advance/{org}/{name}, POST /_replay/head/{org}/{name}?n=N,
        GET /_replay/requests, POST /_replay/reset-requests, GET /_replay/repos."""
        parts = path.strip("/").split("/")
        if method == "GET" and parts == ["_replay", "requests"]:
            return _json(200, [asdict(r) for r in self.requests])
        if method == "GET" and parts == ["_replay", "repos"]:
            repos = [{"id": r, "n": self.head_count(r), "commits": len(self.commits(r))} for r in self.repo_ids()]
            return _json(200, repos)
        if method == "POST" and parts == ["_replay", "reset-requests"]:
            self.reset_requests()
            return _json(200, {})
        if method == "POST" and len(parts) == 4 and parts[1] in ("advance", "head"):
            repo_id = f"{parts[2]}/{parts[3]}"
            if repo_id not in self._repos:
                return _json(404, {"error": f"unknown repo {repo_id}"})
            advanced = self.advance(repo_id) if parts[1] == "advance" else None
            if parts[1] == "head":
                try:
                    self.set_head(repo_id, int(query.get("n", ["x"])[-1]))
                except ValueError as err:
                    return _json(400, {"error": str(err)})
            n = self.head_count(repo_id)
            head = self._repos[repo_id].commits[n - 1].sha if n else None
            return _json(200, {"repo_id": repo_id, "n": n, "head": head, "advanced": advanced})
        return _json(404, {"error": f"no admin route {method} {path}"})


class _Exchange:
    """One Hub request: authorisation, repo and revision look-up, and the answer of each route."""

    def __init__(self, replay: ReplayServer, handler: _Handler, method: str, raw_path: str, query: str, body: bytes) -> None:
        self.replay, self.method, self.raw_path = replay, method, raw_path
        self.query = parse_qs(query, keep_blank_values=True)
        self.form = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
        self.base_url = f"http://{handler.headers.get('Host') or replay.endpoint.split('//')[1]}"
        self.range = handler.headers.get("Range")
        auth = handler.headers.get("Authorization")
        if auth is None:
            self.auth = "anonymous"
        elif replay.token is None or auth == f"Bearer {replay.token}":
            self.auth = "user"
        else:
            self.auth = "invalid"

    def answer(self) -> _Response:
        try:
            if self.auth == "invalid":
                raise _HubError(401, "Invalid credentials in Authorization header")
            return self._route()
        except _HubError as err:
            return err.response()
        except Exception as err:  # noqa: BLE001 - a bug or bad history data: answer 500 rather than drop the connection
            traceback.print_exc()
            return _HubError(500, f"replay server error: {err!r}").response()

    def _route(self) -> _Response:
        if match := RESOLVE_ROUTE.match(self.raw_path):
            if self.method in ("GET", "HEAD"):
                org, name, rev, path = (unquote(g) for g in match.groups())
                return self.resolve(f"{org}/{name}", rev, path)
        elif match := API_ROUTE.match(self.raw_path):
            repo_id = f"{unquote(match[1])}/{unquote(match[2])}"
            rest = [unquote(part) for part in (match[3] or "").split("/")[1:]]
            get = self.method in ("GET", "HEAD")
            if rest in ([], [""]) and get:
                return self.model_info(repo_id, None)
            if len(rest) == 2 and rest[0] == "revision" and get:
                return self.model_info(repo_id, rest[1])
            if rest == ["refs"] and get:
                return self.refs(repo_id)
            if rest in (["auth-check"], ["auth-check", "write"]) and get:
                return self.auth_check(repo_id)
            if len(rest) == 2 and rest[0] == "commits" and get:
                return self.commits(repo_id, rest[1])
            if len(rest) >= 2 and rest[0] == "tree" and get:
                return self.tree(repo_id, rest[1], "/".join(rest[2:]).strip("/"))
            if len(rest) == 2 and rest[0] == "paths-info" and self.method == "POST":
                return self.paths_info(repo_id, rest[1])
        elif self.raw_path in ("/api/models", "/api/models/") and self.method in ("GET", "HEAD"):
            return self.list_models()
        elif self.raw_path.startswith(("/api/models/", "/api/datasets/", "/api/spaces/")):
            raise _HubError(401 if self.auth == "anonymous" else 404, "Repository not found", "RepoNotFound")
        raise _HubError(404, "Sorry, we can't find the page you are looking for.")

    # -- look-ups
    def _repo(self, repo_id: str) -> tuple[RepoHistory, int]:
        found = self.replay._visible(repo_id)
        if found is None or found[1] == 0 or (found[0].private and self.auth != "user"):
            status = 401 if self.auth == "anonymous" else 404
            raise _HubError(status, "Repository not found", "RepoNotFound")
        return found

    def _commit(self, repo: RepoHistory, n: int, rev: str | None) -> ReplayCommit:
        shown = repo.commits[:n]
        branch_head = shown[-1]
        if rev is None or rev in (repo.default_branch, f"refs/heads/{repo.default_branch}"):
            return branch_head
        if re.fullmatch(r"[0-9a-f]{7,40}", rev):
            matches = [c for c in shown if c.sha.startswith(rev)]
            if len(matches) == 1:
                return matches[0]
        raise _HubError(404, f"Invalid rev id: {rev}", "RevisionNotFound")

    def _check_gate(self, repo: RepoHistory) -> None:
        if repo.gated and self.auth != "user":
            raise _HubError(
                401,
                f"Access to model {repo.repo_id} is restricted. You must have access to it and be authenticated"
                " to access it. Please log in.",
                "GatedRepo",
            )

    def _next_link(self, **changes: int | str) -> dict[str, str]:
        pairs = [(k, v) for k, values in self.query.items() if k not in changes for v in values]
        pairs += [(k, str(v)) for k, v in changes.items()]
        return {"Link": f'<{self.base_url}{self.raw_path}?{urlencode(pairs)}>; rel="next"'}

    # -- routes
    def model_info(self, repo_id: str, rev: str | None) -> _Response:
        repo, n = self._repo(repo_id)
        commit = self._commit(repo, n, rev)
        fields = _model_fields(repo, commit, blobs=_flag(self.query.get("blobs")))
        if commit.sha == repo.commits[n - 1].sha:
            with self.replay._lock:
                fields["lastModified"] = _iso(self.replay._last_modified(repo, commit))
        identity = {"_id": fields.pop("_id"), "id": repo.repo_id}
        expand = self.query.get("expand") or self.query.get("expand[]")
        if expand:
            if unknown := sorted(set(expand) - EXPAND_KEYS):
                raise _HubError(400, f'"expand" must be one of the allowed values, not {", ".join(unknown)}')
            return _json(200, {**identity, **{k: fields[k] for k in expand if k in fields}})
        data = {**identity, "modelId": repo.repo_id, **{k: fields[k] for k in DEFAULT_KEYS if k in fields}}
        if _flag(self.query.get("securityStatus")):
            data["securityRepoStatus"] = {"scansDone": True, "filesWithIssues": []}
        return _json(200, data)

    def list_models(self) -> _Response:
        """GET /api/models: `author`, `sort` (lastModified, createdAt, id), `direction` (-1, the default
        with a sort, or 1), `limit` (at most 1,000, the page), `expand` / `expand[]`, and the page cursor
        of the `Link: <...>; rel="next"` header (an opaque `cursor`: the sort key of the last entry)."""
        query = self.query
        author = query.get("author", [""])[-1] or None
        sort = query.get("sort", ["id"])[-1] or "id"
        if sort not in LIST_SORTS:
            raise _HubError(400, f"Invalid sort: {sort!r} (the replay knows {', '.join(sorted(LIST_SORTS))})")
        direction = query.get("direction", ["-1" if sort != "id" else "1"])[-1]
        if direction not in ("-1", "1"):
            raise _HubError(400, f"Invalid direction: {direction!r}")
        limit = max(1, min(_int_param(query, "limit", self.replay.list_page), LIST_PAGE))
        expand = query.get("expand") or query.get("expand[]") or []
        if unknown := sorted(set(expand) - EXPAND_KEYS):
            raise _HubError(400, f'"expand" must be one of the allowed values, not {", ".join(unknown)}')

        def key(entry: tuple[RepoHistory, ReplayCommit, datetime, str]) -> tuple[str, str]:
            repo, commit, modified, _ = entry
            at = modified if sort == "lastModified" else repo.commits[0].date
            return ("" if sort == "id" else _iso(at), repo.repo_id)

        entries = sorted(self.replay._listing(self.auth == "anonymous", author), key=key, reverse=direction == "-1")
        keys = [key(e) for e in entries]
        start = 0
        if "cursor" in query:
            after = _decode_cursor(query["cursor"][-1])
            start = next((i for i, k in enumerate(keys) if (k < after if direction == "-1" else k > after)), len(keys))
            fault = self.replay._list_fault
            if fault is not None and fault[0] in ("repeat", "skip"):
                start = max(0, start - fault[1]) if fault[0] == "repeat" else start + fault[1]
        page = entries[start : start + limit]
        headers = {}
        if start + limit < len(entries) and page:
            cursor = _encode_cursor(keys[start + len(page) - 1])
            if self.replay._list_fault is not None and self.replay._list_fault[0] == "loop":
                cursor = _encode_cursor(_BEFORE_ALL if direction == "-1" else ("", ""))
            headers = self._next_link(cursor=cursor)
        return _json(200, [_listed_json(e, expand) for e in page], headers)

    def refs(self, repo_id: str) -> _Response:
        repo, n = self._repo(repo_id)
        head = self._commit(repo, n, None)
        branch = {"name": repo.default_branch, "ref": f"refs/heads/{repo.default_branch}", "targetCommit": head.sha}
        data: dict[str, Any] = {"branches": [branch], "converts": [], "tags": []}
        if _flag(self.query.get("include_prs")):
            data["pullRequests"] = []
        return _json(200, data)

    def auth_check(self, repo_id: str) -> _Response:
        repo, _ = self._repo(repo_id)
        self._check_gate(repo)
        return _json(200, {})

    def commits(self, repo_id: str, rev: str) -> _Response:
        repo, n = self._repo(repo_id)
        chain = repo.chain(self._commit(repo, n, rev).sha)
        limit = max(1, min(_int_param(self.query, "limit", COMMITS_PAGE), 1000))
        page = max(0, _int_param(self.query, "p", 0))
        formatted = "formatted" in self.query.get("expand[]", []) + self.query.get("expand", [])
        items = []
        for commit in chain[page * limit : (page + 1) * limit]:
            item = {
                "id": commit.sha,
                "title": commit.title,
                "message": commit.message,
                "authors": [{"user": a, "avatar": f"{self.base_url}/avatars/{a}.svg"} for a in commit.authors],
                "date": _iso(commit.date),
            }
            if formatted:
                item["formatted"] = {"title": html.escape(commit.title), "message": html.escape(commit.message)}
            items.append(item)
        headers = {"X-Total-Count": str(len(chain))}
        if (page + 1) * limit < len(chain):
            headers.update(self._next_link(p=page + 1))
        return _json(200, items, headers)

    def tree(self, repo_id: str, rev: str, path: str) -> _Response:
        repo, n = self._repo(repo_id)
        commit = self._commit(repo, n, rev)
        node = repo.node(commit.sha, path)
        if node is None or node.is_file:
            raise _HubError(404, f"Entry not found: {path}", "EntryNotFound", {"X-Repo-Commit": commit.sha})
        expand = _flag(self.query.get("expand"))
        nodes = repo.list_dir(commit.sha, path, recursive=_flag(self.query.get("recursive")))
        size = TREE_PAGE_EXPANDED if expand else TREE_PAGE
        cursor = max(0, _int_param(self.query, "cursor", 0))
        page = [_node_json(repo, commit.sha, node, expand) for node in nodes[cursor : cursor + size]]
        headers = self._next_link(cursor=cursor + size) if cursor + size < len(nodes) else {}
        return _json(200, page, headers)

    def paths_info(self, repo_id: str, rev: str) -> _Response:
        repo, n = self._repo(repo_id)
        commit = self._commit(repo, n, rev)
        expand = _flag(self.form.get("expand"))
        paths = dict.fromkeys(p.strip("/") for p in self.form.get("paths", []) if p.strip("/"))
        nodes = [node for p in paths if (node := repo.node(commit.sha, p)) is not None]
        return _json(200, [_node_json(repo, commit.sha, node, expand) for node in nodes])

    def resolve(self, repo_id: str, rev: str, path: str) -> _Response:
        repo, n = self._repo(repo_id)
        self._check_gate(repo)
        commit = self._commit(repo, n, rev)
        entry = repo.trees[commit.sha].get(path)
        if entry is None or entry.missing:
            raise _HubError(404, "Entry not found", "EntryNotFound", {"X-Repo-Commit": commit.sha})
        blob = entry.blob
        headers = {
            "X-Repo-Commit": commit.sha,
            "ETag": f'"{blob.oid}"',
            "Accept-Ranges": "bytes",
            "Content-Type": "application/octet-stream",
        }
        if isinstance(blob, LfsBlob):
            etag = f'"{blob.lfs_sha256}"'
            headers.update({"ETag": etag, "X-Linked-Etag": etag, "X-Linked-Size": str(blob.size)})
        start, stop, status = 0, blob.size, 200
        match = RANGE.fullmatch(self.range or "")
        if match and (match[1] or match[2]):
            if match[1]:
                start = int(match[1])
                stop = min(int(match[2]) + 1, blob.size) if match[2] else blob.size
            else:
                start = max(0, blob.size - int(match[2]))
            if start >= stop:
                headers["Content-Range"] = f"bytes */{blob.size}"
                raise _HubError(416, "Range Not Satisfiable", headers=headers)
            headers["Content-Range"] = f"bytes {start}-{stop - 1}/{blob.size}"
            status = 206
        return _Response(status, headers, blob=blob, start=start, stop=stop)


_BEFORE_ALL = ("\uffff", "\uffff")  # sorts after every key: a descending listing restarts from the top


def _encode_cursor(key: tuple[str, str]) -> str:
    return base64.urlsafe_b64encode(json.dumps(list(key)).encode()).decode()


def _decode_cursor(value: str) -> tuple[str, str]:
    try:
        at, repo_id = json.loads(base64.urlsafe_b64decode(value.encode()))
        return str(at), str(repo_id)
    except (ValueError, TypeError) as err:
        raise _HubError(400, f"Invalid cursor: {value!r}") from err


def _listed_json(entry: tuple[RepoHistory, ReplayCommit, datetime, str], expand: list[str]) -> dict[str, Any]:
    """One /api/models entry: `_id`, `id` and the expanded keys, or the listing's default keys."""
    repo, commit, modified, listed_sha = entry
    if set(expand) - {"sha", "lastModified", "author", "private", "gated", "createdAt"}:
        fields = _model_fields(repo, commit, blobs=False)  # the costly keys: computed only when asked
    else:
        card = repo.meta_card_data or {}
        fields = {
            "_id": repo.commits[0].sha[:24],
            "author": repo.repo_id.split("/")[0],
            "createdAt": _iso(repo.commits[0].date),
            "private": repo.private,
            "gated": repo.gated,
            "downloads": 0,
            "likes": 0,
            "trendingScore": 0,
            "tags": [str(t) for t in card.get("tags", []) if isinstance(card.get("tags"), list)],
            **{k: card[k] for k in ("library_name", "pipeline_tag") if isinstance(card.get(k), str)},
        }
    fields.update(sha=listed_sha, lastModified=_iso(modified))
    identity = {"_id": fields["_id"], "id": repo.repo_id}
    if expand:
        return {**identity, **{k: fields[k] for k in expand if k in fields}}
    return {**identity, "modelId": repo.repo_id, **{k: fields[k] for k in LIST_DEFAULT_KEYS if k in fields}}


def _model_fields(repo: RepoHistory, commit: ReplayCommit, blobs: bool) -> dict[str, Any]:
    """Every model-info field the replay knows for `commit`, keyed by the Hub's names."""
    tree = repo.trees[commit.sha]
    card = repo.card_data(commit.sha) or {}
    siblings = []
    for path in sorted(tree):
        sibling: dict[str, Any] = {"rfilename": path}
        if blobs:
            blob = tree[path].blob
            sibling.update(size=blob.size, blobId=blob.oid)
            if isinstance(blob, LfsBlob):
                sibling["lfs"] = {"sha256": blob.lfs_sha256, "size": blob.size, "pointerSize": len(blob.pointer)}
        siblings.append(sibling)
    parameters: dict[str, int] = {}
    for entry in tree.values():
        for dtype, count in parameter_counts(entry.safetensors or {}).items():
            parameters[dtype] = parameters.get(dtype, 0) + count
    card_tags = card.get("tags") if isinstance(card.get("tags"), list) else []
    tags = [*card_tags, card.get("library_name"), "safetensors" if parameters else None]
    if isinstance(card.get("license"), str):
        tags.append(f"license:{card['license']}")
    fields: dict[str, Any] = {
        "_id": repo.commits[0].sha[:24],
        "author": repo.repo_id.split("/")[0],
        "sha": commit.sha,
        "lastModified": _iso(commit.date),
        "createdAt": _iso(repo.commits[0].date),
        "private": repo.private,
        "gated": repo.gated,
        "disabled": False,
        "downloads": 0,
        "downloadsAllTime": 0,
        "likes": 0,
        "trendingScore": 0,
        "childrenModelCount": 0,
        "tags": list(dict.fromkeys(str(t) for t in tags if t)),
        "cardData": card or None,
        "siblings": siblings,
        "spaces": [],
        "usedStorage": sum(entry.blob.size for entry in tree.values()),
    }
    for key in ("library_name", "pipeline_tag"):
        if isinstance(card.get(key), str):
            fields[key] = card[key]
    if parameters:
        fields["safetensors"] = {"parameters": parameters, "total": sum(parameters.values())}
    config = tree.get("config.json")
    if config is not None and not isinstance(config.blob, LfsBlob) and config.blob.size < (1 << 20):
        try:
            parsed = json.loads(config.blob.read())
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            fields["config"] = {k: parsed[k] for k in ("architectures", "model_type") if k in parsed}
    return {k: v for k, v in fields.items() if v is not None}


def _node_json(repo: RepoHistory, sha: str, node: Node, expand: bool) -> dict[str, Any]:
    """A tree or paths-info entry, with the keys the client's RepoFile / RepoFolder parse."""
    if node.entry is None:
        data: dict[str, Any] = {"type": "directory", "oid": repo.tree_oid(sha, node.path), "size": 0, "path": node.path}
    else:
        blob = node.entry.blob
        data = {"type": "file", "oid": blob.oid, "size": blob.size, "path": node.path}
        if isinstance(blob, LfsBlob):
            data["lfs"] = {"oid": blob.lfs_sha256, "size": blob.size, "pointerSize": len(blob.pointer)}
    if expand:
        last = repo.last_commit(sha, node.path)
        data["lastCommit"] = {"id": last.sha, "title": last.title, "date": _iso(last.date)}
        if node.entry is not None:
            data["securityFileStatus"] = {
                "status": "safe",
                "avScan": {"virusFound": False, "virusNames": None},
                "pickleImportScan": None,
            }
    return data


class _Handler(KeepAliveHandler):
    """Routes every request to the replay's answers."""

    @property
    def replay(self) -> ReplayServer:
        return self.owner

    def _handle(self, method: str) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        raw_path, _, query = self.path.partition("?")
        raw_path = urlsplit(raw_path).path or "/"
        path = unquote(raw_path)
        if path == "/api/agent-harnesses":
            response = _HubError(404, "Not Found").response()
        elif path.startswith("/_replay/"):
            response = self.replay._admin(method, path, parse_qs(query))
        else:
            response = self.replay._take_fault(method, path)
            if response is None:
                response = _Exchange(self.replay, self, method, raw_path, query, body).answer()
            self.replay._record(RecordedRequest(method, path, query, response.status, self.headers.get("Range")))
            if self.replay._ratelimit and "RateLimit" not in response.headers:
                response.headers.update(self.replay._ratelimit)
        if response.silent_s is not None:
            time.sleep(response.silent_s)
            self.close_connection = True
            return
        self._write(method, response)

    def _write(self, method: str, response: _Response) -> None:
        length = response.stop - response.start if response.blob is not None else len(response.body)
        self.send_response(response.status)
        for name, value in response.headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(length))
        self.end_headers()
        if method == "HEAD":
            return
        try:
            if response.blob is None:
                self.wfile.write(response.body)
            else:
                for chunk in response.blob.chunks(response.start, response.stop):
                    self.wfile.write(chunk)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
