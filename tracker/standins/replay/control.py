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

`set_state` puts a repo into one of the states the Hub puts repos in (`REPO_STATES`): "deleted" (every route
answers RepoNotFound: 401 anonymous, 404 with a token, and the listing drops it), "private" (outsiders get
RepoNotFound, a token with access reads on and model info says `private: true`), "gated" (info, refs, commits and
trees stay readable; `/resolve/` refuses with GatedRepo: 401 anonymous, 403 for a token not `granted`),
"disabled" (every route answers 403 with `X-Error-Message: Access to this resource is disabled.`, no error code,
as the Hub does), "branch_deleted" (the default branch is gone: its name answers RevisionNotFound and refs list no
branch; commits stay readable by sha) and "active" (restored: as recorded, and last modified now, so the listing
shows it again). The same is `POST /_replay/state/{org}/{name}?state=S[&gated=auto|manual]`.

`rename(old, new)` is the Hub's rename: the repo is served under `new` (model info's `id` says so, its `_id` and
`createdAt` stay), and every API and `/resolve/` request for `old` is answered 307 to the same path under `new`
(the client follows it), until a repo is created under `old` again (`add_repo`): a new repo, another `_id`.

`canonical_name(short, dataset)` is a canonical short dataset name (`wikitext`, no org) the Hub moved under an org
(`datasets/Salesforce/wikitext`): every API and `/resolve/` request naming the dataset `short` is answered 307 to
the same path under the org name, as a rename is (`POST /_replay/canonical/{short}?to=ORG/NAME`).

`squash(repo)` is the Hub's super-squash: the branch becomes one new commit holding the head's tree, the old shas gone.

(`POST /_replay/squash/{org}/{name}`.)

`serve_from_cdn(repo)` moves a repo's LFS files to the CDN stand-in (cdn.py, another host): `/resolve/` answers them
with a 302 to a signed URL that honours Range, its metadata headers kept; `migrate_to_xet(repo)` is the Hub's Xet
migration: that, and every LFS entry of its trees and paths-info lists a `xetHash` beside its unchanged `lfs.oid`
(no commit is made). For a replay in another process: `POST /_replay/storage/{org}/{name}?to=cdn|xet`.

The client's background `GET /api/agent-harnesses` is answered 404 and never recorded; neither are the
admin routes under `/_replay/` (see `_admin`).
"""

from __future__ import annotations

import hashlib
import re
import threading
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

from tracker.standins.loopback import KeepAliveHandler, LoopbackServer
from tracker.standins.replay.cdn import CdnServer
from tracker.standins.replay.history import (
    LfsBlob,
    ReplayCommit,
    RepoHistory,
    load_roots,
)
from tracker.standins.replay.protocol import (
    DATASET_PREFIX,
    LIST_FAULTS,
    LIST_PAGE,
    Exchange,
    HubError,
    Response,
    json_response,
)

BUNDLED_ROOT = Path(__file__).resolve().parent / "histories"
RATE_LIMIT_HEADERS = {"RateLimit": '"{kind}";r=0;t=0', "RateLimit-Policy": '"fixed window";"{kind}";q=500;w=300'}
REPO_STATES = ("active", "deleted", "private", "gated", "disabled", "branch_deleted")
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
        self._ignore_range: re.Pattern[str] | None = None  # resolve paths answered whole (200) whatever Range asks
        self._moved_at: dict[str, datetime] = {}  # when a head last moved while served (the listing's clock)
        self._listed_sha: dict[str, str] = {}  # a listing that claims another sha than the repo's own
        self._list_fault: tuple[str, int] | None = None
        self._ratelimit: dict[str, str] = {}  # headers added to every answer (send_ratelimit)
        self.list_page = LIST_PAGE  # entries per /api/models page when the client sends no limit
        self._states: dict[str, str] = {}  # repo id -> a state of REPO_STATES other than "active"
        self._recorded_flags: dict[str, tuple[bool, str | bool]] = {}  # (private, gated) as recorded, while changed
        self._gate_granted: dict[str, bool] = {}  # a gated repo set by `set_state`: whether tokens may read files
        self._renamed: dict[str, str] = {}  # old repo id -> the id it was renamed to (answered 307)
        self._short_names: dict[str, str] = {}  # a canonical short dataset name -> the dataset key it redirects to
        self._on_cdn: dict[str, bool] = {}  # repo id -> its LFS files served from the CDN (True: moved to Xet)
        self.cdn = CdnServer(host)  # the second origin /resolve/ redirects to (started with the first repo on it)
        self._http = LoopbackServer(_Handler, self, "hub-replay", host, port)

    def add_repo(self, history: RepoHistory) -> None:
        """Serve one more repo (built in memory, e.g. `synthetic_history`), all its commits shown. Added
        while the server runs, it is a repo created now: the listing shows it as the newest."""
        with self._lock:
            self._renamed.pop(history.repo_id, None)  # a new repo under a renamed repo's old name
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
        self.cdn.stop()

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

    # -- what the Hub does to a repo itself
    def set_state(self, repo_id: str, state: str, gated: str = "auto", granted: bool = False) -> None:
        """Put the repo into `state` (one of REPO_STATES; see the module's notes): "gated" with its mode
        (`gated`: auto or manual) and whether a token has been `granted` access; "active" restores it as
        recorded, last modified now."""
        if state not in REPO_STATES:
            raise ValueError(f"state must be one of {', '.join(REPO_STATES)}, not {state!r}")
        repo = self._repos[repo_id]
        with self._lock:
            if repo_id in self._recorded_flags:  # back to the recorded flags before applying the new state
                repo.private, repo.gated = self._recorded_flags.pop(repo_id)
            self._gate_granted.pop(repo_id, None)
            self._states.pop(repo_id, None)
            if state != "active":
                self._states[repo_id] = state
            if state in ("private", "gated"):
                self._recorded_flags[repo_id] = (repo.private, repo.gated)
                if state == "private":
                    repo.private = True
                else:
                    repo.gated, self._gate_granted[repo_id] = gated, granted
            self._touch(repo_id)

    def rename(self, old: str, new: str) -> None:
        """The Hub's rename of `old` to `new` (see the module's notes); its state and head go with it."""
        if new in self._repos:
            raise ValueError(f"{new} exists already")
        with self._lock:
            repo = self._repos.pop(old)
            repo.repo_id = new
            self._repos[new], self._heads[new] = repo, self._heads.pop(old)
            for table in (self._states, self._recorded_flags, self._gate_granted, self._moved_at, self._listed_sha,
                          self._on_cdn):
                if old in table:
                    table[new] = table.pop(old)  # type: ignore[index]
            self._renamed = {o: (new if n == old else n) for o, n in self._renamed.items()}
            self._renamed[old] = new
            self._touch(new)

    def canonical_name(self, short: str, dataset: str) -> None:
        """The dataset `short` (a canonical name without an org, `wikitext`) now lives at `dataset`
        (`datasets/Salesforce/wikitext`, served here): the Hub answers the short name 307 to it."""
        if "/" in short or not short or not dataset.startswith(DATASET_PREFIX) or dataset not in self._repos:
            raise ValueError(f"cannot redirect {short!r} to {dataset!r}: a name without an org to a served dataset")
        with self._lock:
            self._short_names[short] = dataset

    def _canonical_of(self, short: str) -> str | None:
        with self._lock:
            return self._short_names.get(short)

    # -- where the bytes are stored
    def serve_from_cdn(self, repo_id: str) -> None:
        """The repo's LFS files move to the CDN: `/resolve/` answers them with a 302 to a signed URL on the CDN
        stand-in (`self.cdn`, another host), keeping the Hub's metadata headers; nothing else changes (no commit)."""
        self._move_storage(repo_id, xet=False)

    def migrate_to_xet(self, repo_id: str) -> None:
        """The Hub's Xet migration of the repo: no commit, every LFS entry of its trees and paths-info gains a
        `xetHash` (its `lfs.oid`, size and blob id unchanged), and its LFS files are served from the CDN as
        `serve_from_cdn` does."""
        self._move_storage(repo_id, xet=True)

    def _move_storage(self, repo_id: str, xet: bool) -> None:
        if repo_id not in self._repos:
            raise KeyError(repo_id)
        with self._lock:
            self._on_cdn[repo_id] = xet or self._on_cdn.get(repo_id, False)
            if not self.cdn.running:
                self.cdn.start()

    def _cdn_url(self, repo_id: str, blob: LfsBlob, path: str) -> str | None:
        with self._lock:
            if repo_id not in self._on_cdn:
                return None
        return self.cdn.sign(blob.lfs_sha256, blob, path.rsplit("/", 1)[-1])

    def _on_xet(self, repo_id: str) -> bool:
        with self._lock:
            return self._on_cdn.get(repo_id, False)

    def squash(self, repo_id: str) -> str:
        """The Hub's super-squash of the default branch: its history becomes one new commit, without a parent, holding
        the head's tree; every earlier sha is gone (from the commit listing, and by sha). Returns the new sha."""
        with self._lock:
            repo = self._repos[repo_id]
            head = repo.commits[self._heads[repo_id] - 1]
            sha = hashlib.sha1(f"squash\n{repo_id}\n{head.sha}".encode()).hexdigest()
            squashed = ReplayCommit(sha=sha, title=f"Super-squash branch '{repo.default_branch}'", message="",
                                    authors=("squasher",), date=datetime.now(UTC), dirname=f"squash-{head.dirname}",
                                    parent=None, index=0, touched=frozenset(repo.trees[head.sha]))
            repo.trees[sha] = repo.trees[head.sha]
            repo.replace_history([squashed])
            self._heads[repo_id] = 1
            self._touch(repo_id)
        return sha

    def _renamed_to(self, repo_id: str) -> str | None:
        with self._lock:
            return None if repo_id in self._repos else self._renamed.get(repo_id)

    def state(self, repo_id: str) -> str:
        with self._lock:
            return self._states.get(repo_id, "active")

    def _state_of(self, repo_id: str) -> tuple[str, bool]:
        """The repo's state and, when gated by `set_state`, whether tokens were granted access."""
        with self._lock:
            return self._states.get(repo_id, "active"), self._gate_granted.get(repo_id, True)

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

    def _listing(self, anonymous: bool, author: str | None, datasets: bool = False,
                 ) -> list[tuple[RepoHistory, ReplayCommit, datetime, str]]:
        """The models (`datasets`: the datasets) a listing shows: (repo, head commit, lastModified, listed sha)."""
        with self._lock:
            out = []
            for repo_id, repo in self._repos.items():
                n = self._heads[repo_id]
                if repo_id.startswith("datasets/") != datasets:
                    continue
                if n == 0 or (repo.private and anonymous) or (author and repo_id.removeprefix("datasets/").split("/")[0] != author):
                    continue
                if self._states.get(repo_id) in ("deleted", "disabled"):
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
            self._ignore_range = None

    def ignore_range(self, path: str | None = r"/resolve/") -> None:
        """Answer requests whose path matches `path` as a server that does not know Range would: 200 and the
        whole body (a proxy or mirror that strips the header). None serves ranges again."""
        with self._lock:
            self._ignore_range = re.compile(path) if path is not None else None

    def _ignores_range(self, path: str) -> bool:
        with self._lock:
            return self._ignore_range is not None and self._ignore_range.search(path) is not None

    def _take_fault(self, method: str, path: str) -> Response | None:
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
            return Response(0, silent_s=fault.silent_s)
        headers = {}
        if fault.status == 429:
            kind = "resolvers" if "/resolve/" in path else "api"
            headers = {k: v.format(kind=kind) for k, v in RATE_LIMIT_HEADERS.items()}
        message = FAULT_MESSAGES.get(fault.status, "Injected fault" if fault.status < 500 else "Internal Error")
        return HubError(fault.status, message, headers={**headers, **fault.headers}).response()

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self._requests.append(request)

    def _visible(self, repo_id: str) -> tuple[RepoHistory, int] | None:
        with self._lock:
            repo = self._repos.get(repo_id)
            return (repo, self._heads[repo_id]) if repo is not None else None

    # -- admin routes, for a server in another process
    def _admin(self, method: str, path: str, query: dict[str, list[str]]) -> Response:
        """(A dataset's routes name it `datasets/{org}/{name}`.) POST /_replay/advance/{org}/{name}, POST /_replay/head/{org}/{name}?n=N,
        POST /_replay/state/{org}/{name}?state=S[&gated=MODE], POST /_replay/rename/{org}/{name}?to=ORG/NAME,
        POST /_replay/storage/{org}/{name}?to=cdn|xet, POST /_replay/squash/{org}/{name},
        POST /_replay/canonical/{short}?to=ORG/NAME (a dataset's short name redirected to it),
        GET /_replay/requests, POST /_replay/reset-requests, GET /_replay/repos."""
        parts = path.strip("/").split("/")
        if len(parts) == 5 and parts[2] == "datasets":  # a dataset: /_replay/<op>/datasets/{org}/{name}
            parts = [parts[0], parts[1], f"datasets/{parts[3]}", parts[4]]
        if method == "GET" and parts == ["_replay", "requests"]:
            return json_response(200, [asdict(r) for r in self.requests])
        if method == "GET" and parts == ["_replay", "repos"]:
            repos = [{"id": r, "n": self.head_count(r), "commits": len(self.commits(r))} for r in self.repo_ids()]
            return json_response(200, repos)
        if method == "POST" and parts == ["_replay", "reset-requests"]:
            self.reset_requests()
            return json_response(200, {})
        if method == "POST" and len(parts) == 3 and parts[1] == "canonical":
            try:
                self.canonical_name(parts[2], DATASET_PREFIX + query.get("to", [""])[-1])
            except ValueError as err:
                return json_response(400, {"error": str(err)})
            return json_response(200, {"short": parts[2], "repo_id": self._canonical_of(parts[2])})
        if method == "POST" and len(parts) == 4 and parts[1] == "rename":
            repo_id, new = f"{parts[2]}/{parts[3]}", query.get("to", [""])[-1]
            if repo_id not in self._repos or new.count("/") != 1:
                return json_response(404 if repo_id not in self._repos else 400, {"error": f"cannot rename {repo_id} to {new!r}"})
            try:
                self.rename(repo_id, new)
            except ValueError as err:
                return json_response(400, {"error": str(err)})
            return json_response(200, {"repo_id": new, "renamed_from": repo_id})
        if method == "POST" and len(parts) == 4 and parts[1] in ("storage", "squash"):
            repo_id = f"{parts[2]}/{parts[3]}"
            if repo_id not in self._repos:
                return json_response(404, {"error": f"unknown repo {repo_id}"})
            if parts[1] == "squash":
                return json_response(200, {"repo_id": repo_id, "head": self.squash(repo_id)})
            to = query.get("to", [""])[-1]
            if to not in ("cdn", "xet"):
                return json_response(400, {"error": f"storage must be cdn or xet, not {to!r}"})
            self.migrate_to_xet(repo_id) if to == "xet" else self.serve_from_cdn(repo_id)
            return json_response(200, {"repo_id": repo_id, "storage": to, "cdn": self.cdn.origin})
        if method == "POST" and len(parts) == 4 and parts[1] == "state":
            repo_id = f"{parts[2]}/{parts[3]}"
            if repo_id not in self._repos:
                return json_response(404, {"error": f"unknown repo {repo_id}"})
            try:
                self.set_state(repo_id, query.get("state", [""])[-1], gated=query.get("gated", ["auto"])[-1])
            except ValueError as err:
                return json_response(400, {"error": str(err)})
            return json_response(200, {"repo_id": repo_id, "state": self.state(repo_id)})
        if method == "POST" and len(parts) == 4 and parts[1] in ("advance", "head"):
            repo_id = f"{parts[2]}/{parts[3]}"
            if repo_id not in self._repos:
                return json_response(404, {"error": f"unknown repo {repo_id}"})
            advanced = self.advance(repo_id) if parts[1] == "advance" else None
            if parts[1] == "head":
                try:
                    self.set_head(repo_id, int(query.get("n", ["x"])[-1]))
                except ValueError as err:
                    return json_response(400, {"error": str(err)})
            n = self.head_count(repo_id)
            head = self._repos[repo_id].commits[n - 1].sha if n else None
            return json_response(200, {"repo_id": repo_id, "n": n, "head": head, "advanced": advanced})
        return json_response(404, {"error": f"no admin route {method} {path}"})


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
            response = HubError(404, "Not Found").response()
        elif path.startswith("/_replay/"):
            response = self.replay._admin(method, path, parse_qs(query))
        else:
            response = self.replay._take_fault(method, path)
            if response is None:
                exchange = Exchange(self.replay, self.headers, method, raw_path, query, body)
                if self.replay._ignores_range(path):
                    exchange.range = None
                response = exchange.answer()
            self.replay._record(RecordedRequest(method, path, query, response.status, self.headers.get("Range")))
            if self.replay._ratelimit and "RateLimit" not in response.headers:
                response.headers.update(self.replay._ratelimit)
        if response.silent_s is not None:
            time.sleep(response.silent_s)
            self.close_connection = True
            return
        self._write(method, response)

    def _write(self, method: str, response: Response) -> None:
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
