"""The Hub's HTTP API as the replay answers it: routes, authorisation, pagination, model info, trees,
commits, refs, the listing and file downloads with Range. Each request is one `Exchange` over the state
that `control.ReplayServer` holds; the answers follow the Hub's wire format (see control.py's notes on
which client calls retry)."""

from __future__ import annotations

import base64
import hashlib
import html
import json
import re
import traceback
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import parse_qs, unquote, urlencode

from tracker.standins.replay.history import (
    Blob,
    LfsBlob,
    Node,
    ReplayCommit,
    RepoHistory,
    parameter_counts,
)

if TYPE_CHECKING:
    import threading
    from email.message import Message

COMMITS_PAGE = 50
LIST_PAGE = 1000  # the Hub's page of /api/models (and its largest `limit`)
LIST_FAULTS = ("repeat", "skip", "loop")
DISABLED_MESSAGE = "Access to this resource is disabled."  # the Hub's words; huggingface_hub keys DisabledRepoError on them
LIST_SORTS = {"lastModified", "createdAt", "id", "downloads"}
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
# Dataset repos are held under their key `datasets/org/name` (storage.kinds.repo_key): the API's
# `/api/datasets/org/name` and the files' `/datasets/org/name/resolve/...` name them; answers call them `org/name`.
API_ROUTE = re.compile(r"^/api/(models|datasets)/([^/]+)/([^/]+)(/.*)?$")
RESOLVE_ROUTE = re.compile(r"^/(datasets/)?([^/]+)/([^/]+)/resolve/([^/]+)/(.+)$")
DATASET_PREFIX = "datasets/"
# A dataset named by a canonical short name, without an org (`/api/datasets/wikitext/...`, `/datasets/wikitext/resolve/...`).
SHORT_DATASET_ROUTE = re.compile(r"^/(api/datasets|datasets)/([^/]+)(/.*)?$")
CONVERT_REF = "refs/convert/parquet"  # the dataset viewer's Parquet conversion branch
DATASET_EXPAND_KEYS = frozenset(
    "author cardData citation createdAt description disabled downloads downloadsAllTime gated lastModified likes "
    "paperswithcode_id private resourceGroup sha siblings tags trendingScore usedStorage".split()
)
DATASET_DEFAULT_KEYS = "author sha lastModified private disabled gated downloads likes tags createdAt cardData siblings".split()
DATASET_LIST_DEFAULT_KEYS = "id author sha lastModified private gated disabled downloads likes tags createdAt".split()
RANGE = re.compile(r"\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*")


class ReplayState(Protocol):
    """What an exchange reads of the server's state (control.ReplayServer holds it)."""

    token: str | None
    list_page: int
    _lock: threading.Lock
    _list_fault: tuple[str, int] | None

    @property
    def endpoint(self) -> str: ...

    def _visible(self, repo_id: str) -> tuple[RepoHistory, int] | None: ...

    def _state_of(self, repo_id: str) -> tuple[str, bool]: ...

    def _renamed_to(self, repo_id: str) -> str | None: ...

    def _canonical_of(self, short: str) -> str | None: ...

    def _cdn_url(self, repo_id: str, blob: LfsBlob, path: str) -> str | None: ...

    def _on_xet(self, repo_id: str) -> bool: ...

    def _last_modified(self, repo: RepoHistory, commit: ReplayCommit) -> datetime: ...

    def _listing(self, anonymous: bool, author: str | None, datasets: bool = False,
                 ) -> list[tuple[RepoHistory, ReplayCommit, datetime, str]]: ...


@dataclass
class Response:
    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    blob: Blob | None = None  # when set, bytes [start, stop) of the blob are the body
    start: int = 0
    stop: int = 0
    silent_s: float | None = None  # no answer at all: close the connection after this many seconds


class HubError(Exception):
    """An error answered the way the Hub does: status, X-Error-Code, X-Error-Message, JSON body."""

    def __init__(self, status: int, message: str, code: str | None = None, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.code, self.headers = status, message, code, headers or {}

    def response(self) -> Response:
        headers = {**self.headers, "X-Error-Message": self.message.encode("ascii", "replace").decode()}
        if self.code:
            headers["X-Error-Code"] = self.code
        return json_response(self.status, {"error": self.message}, headers)


def json_response(status: int, data: Any, headers: dict[str, str] | None = None) -> Response:
    body = json.dumps(data, default=str).encode()
    return Response(status, {"Content-Type": "application/json; charset=utf-8", **(headers or {})}, body)


def _iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _flag(values: list[str] | None) -> bool:
    return bool(values) and values[-1].lower() in ("true", "1")


def _int_param(query: dict[str, list[str]], name: str, default: int) -> int:
    try:
        return int(query[name][-1]) if name in query else default
    except ValueError:
        raise HubError(400, f"Invalid {name}: {query[name][-1]!r}") from None


class Exchange:
    """One Hub request: authorisation, repo and revision look-up, and the answer of each route."""

    def __init__(self, replay: ReplayState, headers: Message, method: str, raw_path: str, query: str, body: bytes) -> None:
        self.replay, self.method, self.raw_path, self.raw_query = replay, method, raw_path, query
        self.query = parse_qs(query, keep_blank_values=True)
        self.form = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
        self.base_url = f"http://{headers.get('Host') or replay.endpoint.split('//')[1]}"
        self.range = headers.get("Range")
        auth = headers.get("Authorization")
        if auth is None:
            self.auth = "anonymous"
        elif replay.token is None or auth == f"Bearer {replay.token}":
            self.auth = "user"
        else:
            self.auth = "invalid"

    def answer(self) -> Response:
        try:
            if self.auth == "invalid":
                raise HubError(401, "Invalid credentials in Authorization header")
            return self._route()
        except HubError as err:
            return err.response()
        except Exception as err:  # noqa: BLE001 - a bug or bad history data: answer 500 rather than drop the connection
            traceback.print_exc()
            return HubError(500, f"replay server error: {err!r}").response()

    def _route(self) -> Response:
        moved = self._moved()
        if moved is not None:
            return moved
        if match := RESOLVE_ROUTE.match(self.raw_path):
            if self.method in ("GET", "HEAD"):
                org, name, rev, path = (unquote(g) for g in match.groups()[1:])
                return self.resolve(f"{match[1] or ''}{org}/{name}", rev, path)
        elif match := API_ROUTE.match(self.raw_path):
            prefix = DATASET_PREFIX if match[1] == "datasets" else ""
            repo_id = f"{prefix}{unquote(match[2])}/{unquote(match[3])}"
            rest = [unquote(part) for part in (match[4] or "").split("/")[1:]]
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
        elif self.raw_path in ("/api/datasets", "/api/datasets/") and self.method in ("GET", "HEAD"):
            return self.list_models(datasets=True)
        elif self.raw_path.startswith(("/api/models/", "/api/datasets/", "/api/spaces/")):
            raise HubError(401 if self.auth == "anonymous" else 404, "Repository not found", "RepoNotFound")
        raise HubError(404, "Sorry, we can't find the page you are looking for.")

    def _moved(self) -> Response | None:
        """A request for a renamed repo's old name: 307 to the same path and query under the new name, as the Hub
        answers on the API and on /resolve/; so is a canonical short dataset name moved under an org."""
        short = SHORT_DATASET_ROUTE.match(self.raw_path)
        canonical = self.replay._canonical_of(unquote(short[2])) if short is not None else None
        if short is not None and canonical is not None and (short[1] == "api/datasets" or
                                                            (short[3] or "").startswith("/resolve/")):
            location = f"{self.base_url}/{short[1]}/{canonical.removeprefix(DATASET_PREFIX)}{short[3] or ''}"
            location += f"?{self.raw_query}" if self.raw_query else ""
            return json_response(307, {"error": f"Repository moved to {canonical}"}, {"Location": location})
        if short is not None and short[1] == "api/datasets" and re.fullmatch(r"(/revision/[^/]+)?/?", short[3] or ""):
            raise HubError(401 if self.auth == "anonymous" else 404, "Repository not found", "RepoNotFound")  # no org
        match = RESOLVE_ROUTE.match(self.raw_path)
        if match is not None:
            kind, prefix = match[1] or "", ""
        else:
            match = API_ROUTE.match(self.raw_path)
            if match is None:
                return None
            kind = DATASET_PREFIX if match[1] == "datasets" else ""
            prefix = f"/api/{match[1]}"
        new = self.replay._renamed_to(f"{kind}{unquote(match[2])}/{unquote(match[3])}")
        if new is None:
            return None
        rest = self.raw_path[match.end(3):]
        shown = new.removeprefix(DATASET_PREFIX) if prefix else new  # /api/datasets/<org/name>, /datasets/<org/name>/resolve
        location = f"{self.base_url}{prefix}/{shown}{rest}" + (f"?{self.raw_query}" if self.raw_query else "")
        return json_response(307, {"error": f"Repository moved to {new}"}, {"Location": location})

    # -- look-ups
    def _repo(self, repo_id: str) -> tuple[RepoHistory, int]:
        found = self.replay._visible(repo_id)
        state = self.replay._state_of(repo_id)[0] if found is not None else "active"
        if found is None or found[1] == 0 or state == "deleted" or (found[0].private and self.auth != "user"):
            status = 401 if self.auth == "anonymous" else 404
            raise HubError(status, "Repository not found", "RepoNotFound")
        if state == "disabled":
            raise HubError(403, DISABLED_MESSAGE)
        return found

    def _commit(self, repo: RepoHistory, n: int, rev: str | None) -> ReplayCommit:
        shown = repo.commits[:n]
        branch_head = shown[-1]
        converted = repo.converted(n)
        if rev == CONVERT_REF and converted:
            return converted[-1]
        if rev is not None and converted and re.fullmatch(r"[0-9a-f]{7,40}", rev):
            found = [c for c in converted if c.sha.startswith(rev)]
            if len(found) == 1 and not any(c.sha.startswith(rev) for c in shown):
                return found[0]
        if rev is None or rev in (repo.default_branch, f"refs/heads/{repo.default_branch}"):
            if rev is not None and self.replay._state_of(repo.repo_id)[0] == "branch_deleted":
                raise HubError(404, f"Invalid rev id: {rev or repo.default_branch}", "RevisionNotFound")
            return branch_head
        if re.fullmatch(r"[0-9a-f]{7,40}", rev):
            matches = [c for c in shown if c.sha.startswith(rev)]
            if len(matches) == 1:
                return matches[0]
        raise HubError(404, f"Invalid rev id: {rev}", "RevisionNotFound")

    def _check_gate(self, repo: RepoHistory) -> None:
        granted = self.replay._state_of(repo.repo_id)[1]
        if repo.gated and (self.auth != "user" or not granted):
            raise HubError(
                401 if self.auth != "user" else 403,
                f"Access to {_kind_word(repo)} {_hub_id(repo)} is restricted. You must have access to it and be authenticated"
                " to access it. Please log in.",
                "GatedRepo",
            )

    def _next_link(self, **changes: int | str) -> dict[str, str]:
        pairs = [(k, v) for k, values in self.query.items() if k not in changes for v in values]
        pairs += [(k, str(v)) for k, v in changes.items()]
        return {"Link": f'<{self.base_url}{self.raw_path}?{urlencode(pairs)}>; rel="next"'}

    # -- routes
    def model_info(self, repo_id: str, rev: str | None) -> Response:
        repo, n = self._repo(repo_id)
        commit = self._commit(repo, n, rev)
        dataset = _is_dataset(repo)
        fields = _model_fields(repo, commit, blobs=_flag(self.query.get("blobs")))
        if commit.sha == repo.commits[n - 1].sha:
            with self.replay._lock:
                fields["lastModified"] = _iso(self.replay._last_modified(repo, commit))
        identity = {"_id": fields.pop("_id"), "id": _hub_id(repo)}
        expand = self.query.get("expand") or self.query.get("expand[]")
        if expand:
            if unknown := sorted(set(expand) - (DATASET_EXPAND_KEYS if dataset else EXPAND_KEYS)):
                raise HubError(400, f'"expand" must be one of the allowed values, not {", ".join(unknown)}')
            return json_response(200, {**identity, **{k: fields[k] for k in expand if k in fields}})
        if dataset:
            return json_response(200, {**identity, **{k: fields[k] for k in DATASET_DEFAULT_KEYS if k in fields}})
        data = {**identity, "modelId": repo.repo_id, **{k: fields[k] for k in DEFAULT_KEYS if k in fields}}
        if _flag(self.query.get("securityStatus")):
            data["securityRepoStatus"] = {"scansDone": True, "filesWithIssues": []}
        return json_response(200, data)

    def list_models(self, datasets: bool = False) -> Response:
        """GET /api/models (and, `datasets`, GET /api/datasets: the same over dataset repos): `author`, `filter`
        (every value given must be one of the model's tags, the
        family tags `base_model:<relation>:<id>` of its card included), `sort` (lastModified, createdAt,
        downloads, id), `direction` (-1, the default with a sort, or 1), `limit` (at most 1,000, the page),
        `expand` / `expand[]`, and the page cursor of the `Link: <...>; rel="next"` header (an opaque
        `cursor`: the sort key of the last entry)."""
        query = self.query
        author = query.get("author", [""])[-1] or None
        wanted = set(query.get("filter", []))
        sort = query.get("sort", ["id"])[-1] or "id"
        if sort not in LIST_SORTS:
            raise HubError(400, f"Invalid sort: {sort!r} (the replay knows {', '.join(sorted(LIST_SORTS))})")
        direction = query.get("direction", ["-1" if sort != "id" else "1"])[-1]
        if direction not in ("-1", "1"):
            raise HubError(400, f"Invalid direction: {direction!r}")
        limit = max(1, min(_int_param(query, "limit", self.replay.list_page), LIST_PAGE))
        expand = query.get("expand") or query.get("expand[]") or []
        if unknown := sorted(set(expand) - (DATASET_EXPAND_KEYS if datasets else EXPAND_KEYS)):
            raise HubError(400, f'"expand" must be one of the allowed values, not {", ".join(unknown)}')

        def key(entry: tuple[RepoHistory, ReplayCommit, datetime, str]) -> tuple[str, str]:
            repo, commit, modified, _ = entry
            if sort == "downloads":
                return (f"{repo.downloads:020d}", repo.repo_id)
            at = modified if sort == "lastModified" else repo.created_at
            return ("" if sort == "id" else _iso(at), repo.repo_id)

        entries = self.replay._listing(self.auth == "anonymous", author, datasets)
        if wanted:
            entries = [e for e in entries if wanted <= set(_tags(e[0], e[1]))]
        entries = sorted(entries, key=key, reverse=direction == "-1")
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
        return json_response(200, [_listed_json(e, expand) for e in page], headers)

    def refs(self, repo_id: str) -> Response:
        repo, n = self._repo(repo_id)
        branches = []
        if self.replay._state_of(repo_id)[0] != "branch_deleted":
            head = self._commit(repo, n, None)
            branches.append({"name": repo.default_branch, "ref": f"refs/heads/{repo.default_branch}", "targetCommit": head.sha})
        converted = repo.converted(n)
        converts = [{"name": "parquet", "ref": CONVERT_REF, "targetCommit": converted[-1].sha}] if converted else []
        data: dict[str, Any] = {"branches": branches, "converts": converts, "tags": []}
        if _flag(self.query.get("include_prs")):
            data["pullRequests"] = []
        return json_response(200, data)

    def auth_check(self, repo_id: str) -> Response:
        repo, _ = self._repo(repo_id)
        self._check_gate(repo)
        return json_response(200, {})

    def commits(self, repo_id: str, rev: str) -> Response:
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
        return json_response(200, items, headers)

    def tree(self, repo_id: str, rev: str, path: str) -> Response:
        repo, n = self._repo(repo_id)
        commit = self._commit(repo, n, rev)
        node = repo.node(commit.sha, path)
        if node is None or node.is_file:
            raise HubError(404, f"Entry not found: {path}", "EntryNotFound", {"X-Repo-Commit": commit.sha})
        expand = _flag(self.query.get("expand"))
        nodes = repo.list_dir(commit.sha, path, recursive=_flag(self.query.get("recursive")))
        size = TREE_PAGE_EXPANDED if expand else TREE_PAGE
        cursor = max(0, _int_param(self.query, "cursor", 0))
        xet = self.replay._on_xet(repo_id)
        page = [_node_json(repo, commit.sha, node, expand, xet) for node in nodes[cursor : cursor + size]]
        headers = self._next_link(cursor=cursor + size) if cursor + size < len(nodes) else {}
        return json_response(200, page, headers)

    def paths_info(self, repo_id: str, rev: str) -> Response:
        repo, n = self._repo(repo_id)
        commit = self._commit(repo, n, rev)
        expand = _flag(self.form.get("expand"))
        paths = dict.fromkeys(p.strip("/") for p in self.form.get("paths", []) if p.strip("/"))
        nodes = [node for p in paths if (node := repo.node(commit.sha, p)) is not None]
        xet = self.replay._on_xet(repo_id)
        return json_response(200, [_node_json(repo, commit.sha, node, expand, xet) for node in nodes])

    def resolve(self, repo_id: str, rev: str, path: str) -> Response:
        repo, n = self._repo(repo_id)
        self._check_gate(repo)
        commit = self._commit(repo, n, rev)
        entry = repo.trees[commit.sha].get(path)
        if entry is None or entry.missing:
            raise HubError(404, "Entry not found", "EntryNotFound", {"X-Repo-Commit": commit.sha})
        blob = entry.blob
        headers = {
            "X-Repo-Commit": commit.sha,
            "ETag": f'"{blob.oid}"',
            "Accept-Ranges": "bytes",
            "Content-Type": "application/octet-stream",
        }
        if commit.sha not in {c.sha for c in repo.commits}:  # a conversion's file: the Hub names its revision
            headers["X-Revision"] = commit.sha
        if isinstance(blob, LfsBlob):
            etag = f'"{blob.lfs_sha256}"'
            headers.update({"ETag": etag, "X-Linked-Etag": etag, "X-Linked-Size": str(blob.size)})
            location = self.replay._cdn_url(repo_id, blob, path)
            if location is not None:  # stored on the CDN: a 302 to its signed URL, the Hub's metadata headers kept
                return Response(302, {**headers, "Location": location})
        asked = byte_range(self.range, blob.size)
        if asked is None:
            return Response(200, headers, blob=blob, start=0, stop=blob.size)
        start, stop = asked
        if start >= stop:
            headers["Content-Range"] = f"bytes */{blob.size}"
            raise HubError(416, "Range Not Satisfiable", headers=headers)
        headers["Content-Range"] = f"bytes {start}-{stop - 1}/{blob.size}"
        return Response(206, headers, blob=blob, start=start, stop=stop)


def byte_range(header: str | None, size: int) -> tuple[int, int] | None:
    """The [start, stop) a `Range: bytes=...` header asks of `size` bytes, None without one; start >= stop when it
    cannot be satisfied (416). Shared by the replay and its CDN stand-in."""
    match = RANGE.fullmatch(header or "")
    if not match or not (match[1] or match[2]):
        return None
    if match[1]:
        return int(match[1]), (min(int(match[2]) + 1, size) if match[2] else size)
    return max(0, size - int(match[2])), size


def xet_hash(blob: LfsBlob) -> str:
    """The stand-in Xet hash of an LFS file (the real one is a Merkle hash of its chunks): stable per content."""
    return hashlib.sha256(b"hubwatch-replay-xet\0" + blob.lfs_sha256.encode()).hexdigest()


_BEFORE_ALL = ("\uffff", "\uffff")  # sorts after every key: a descending listing restarts from the top


def _encode_cursor(key: tuple[str, str]) -> str:
    return base64.urlsafe_b64encode(json.dumps(list(key)).encode()).decode()


def _decode_cursor(value: str) -> tuple[str, str]:
    try:
        at, repo_id = json.loads(base64.urlsafe_b64decode(value.encode()))
        return str(at), str(repo_id)
    except (ValueError, TypeError) as err:
        raise HubError(400, f"Invalid cursor: {value!r}") from err


def _listed_json(entry: tuple[RepoHistory, ReplayCommit, datetime, str], expand: list[str]) -> dict[str, Any]:
    """One /api/models entry: `_id`, `id` and the expanded keys, or the listing's default keys."""
    repo, commit, modified, listed_sha = entry
    if _is_dataset(repo):
        fields = _model_fields(repo, commit, blobs=False)
        fields.update(sha=listed_sha, lastModified=_iso(modified))
        identity = {"_id": fields["_id"], "id": _hub_id(repo)}
        keys = expand or DATASET_LIST_DEFAULT_KEYS
        return {**identity, **{k: fields[k] for k in keys if k in fields and k != "id"}}
    if set(expand) - {"sha", "lastModified", "author", "private", "gated", "createdAt"}:
        fields = _model_fields(repo, commit, blobs=False)  # the costly keys: computed only when asked
    else:
        card = repo.meta_card_data or {}
        fields = {
            "_id": repo.uid,
            "author": _hub_id(repo).split("/")[0],
            "createdAt": _iso(repo.created_at),
            "private": repo.private,
            "gated": repo.gated,
            "downloads": repo.downloads,
            "likes": 0,
            "trendingScore": 0,
            "tags": _tags(repo, commit),
            **{k: card[k] for k in ("library_name", "pipeline_tag") if isinstance(card.get(k), str)},
        }
    fields.update(sha=listed_sha, lastModified=_iso(modified))
    identity = {"_id": fields["_id"], "id": repo.repo_id}
    if expand:
        return {**identity, **{k: fields[k] for k in expand if k in fields}}
    return {**identity, "modelId": repo.repo_id, **{k: fields[k] for k in LIST_DEFAULT_KEYS if k in fields}}


def _tags(repo: RepoHistory, commit: ReplayCommit) -> list[str]:
    """The listing's tags of a model at `commit`: its card's, then the family tags the Hub derives."""
    card = repo.card_data(commit.sha) or {}
    card_tags = card.get("tags") if isinstance(card.get("tags"), list) else []
    return list(dict.fromkeys([*(str(t) for t in card_tags), *repo.family_tags(commit.sha)]))


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
    tags = [*card_tags, card.get("library_name"), "safetensors" if parameters else None, *repo.family_tags(commit.sha)]
    if isinstance(card.get("license"), str):
        tags.append(f"license:{card['license']}")
    fields: dict[str, Any] = {
        "_id": repo.uid,
        "author": _hub_id(repo).split("/")[0],
        "sha": commit.sha,
        "lastModified": _iso(commit.date),
        "createdAt": _iso(repo.created_at),
        "private": repo.private,
        "gated": repo.gated,
        "disabled": False,
        "downloads": repo.downloads,
        "downloadsAllTime": repo.downloads,
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


def _is_dataset(repo: RepoHistory) -> bool:
    return repo.repo_id.startswith(DATASET_PREFIX)


def _hub_id(repo: RepoHistory) -> str:
    """The id the Hub answers with: `org/name` for a model and a dataset alike."""
    return repo.repo_id.removeprefix(DATASET_PREFIX)


def _kind_word(repo: RepoHistory) -> str:
    return "dataset" if _is_dataset(repo) else "model"


def _node_json(repo: RepoHistory, sha: str, node: Node, expand: bool, xet: bool = False) -> dict[str, Any]:
    """A tree or paths-info entry, with the keys the client's RepoFile / RepoFolder parse; `xet`: the repo's LFS files
    moved to Xet storage (their `xetHash` listed beside the unchanged `lfs.oid`)."""
    if node.entry is None:
        data: dict[str, Any] = {"type": "directory", "oid": repo.tree_oid(sha, node.path), "size": 0, "path": node.path}
    else:
        blob = node.entry.blob
        data = {"type": "file", "oid": blob.oid, "size": blob.size, "path": node.path}
        if isinstance(blob, LfsBlob):
            data["lfs"] = {"oid": blob.lfs_sha256, "size": blob.size, "pointerSize": len(blob.pointer)}
            if xet:
                data["xetHash"] = xet_hash(blob)
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


