"""The one module that talks to the Hub, through huggingface_hub only.

Every call has one shape: call the library, translate its errors into ours in `_translate`, return our
own dataclasses. Files are always read by commit sha, never by branch name (a failed metadata request
makes `hf_hub_download(revision="main")` fall back to an older cached copy).
"""

from __future__ import annotations

import errno
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, NoReturn
from urllib.parse import quote

import httpx2
from huggingface_hub import HfApi, hf_hub_url
from huggingface_hub.errors import (
    DisabledRepoError,
    EntryNotFoundError,
    GatedRepoError,
    HfHubHTTPError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
    SafetensorsParsingError,
)
from huggingface_hub.hf_api import RepoFile
from huggingface_hub.utils import build_hf_headers, disable_progress_bars, paginate

from storage.backoff import retry_after_s
from storage.kinds import repo_key, short_dataset_name, split_repo_key
from tracker.errors import BranchMissing, HubUnavailable, RateLimited, RepoDisabled, RepoGated, RepoGone
from tracker.errors import RevisionNotFound as RevisionMissing
from tracker.formats.manifest import TensorInfo, WeightManifest
from tracker.formats.ranged import DEFAULT_BUDGET, CountedSource, OverBudget, RangeError
from tracker.polling.listing import ListedModel
from tracker.revision.snapshot import FileEntry

if TYPE_CHECKING:
    from tracker.polling.budget import HubRateLimit, RequestBudget

# Network-level failures the library lets through: its HTTP stack's own (httpx2: connection refused, name
# not resolved, time-outs, broken answers; none of them an OSError) and the standard library's.
_TRANSPORT_ERRORS = (httpx2.HTTPError, OSError, TimeoutError, ConnectionError)
# A full or read-only local disk is not the Hub's failure.
_LOCAL_DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS})
# What `_translate` maps to our errors; anything else propagates as it is.
_HUB_ERRORS = (HfHubHTTPError, *_TRANSPORT_ERRORS)


@dataclass(frozen=True)
class RepoHead:
    """What one head check learns: the branch's commit and the repo's visibility."""

    sha: str
    private: bool | None = None
    gated: str | bool | None = None
    last_modified: datetime | None = None
    repo_id: str | None = None  # the id the Hub answered with: another than asked for after a rename (a 307 followed)
    uid: str | None = None  # the repo's identity (`_id`): the same across renames, another for a new repo of the name

    def meta(self) -> dict[str, Any]:
        meta: dict[str, Any] = {"private": self.private, "gated": self.gated}
        if self.uid is not None:
            meta["uid"] = self.uid
        return meta


@dataclass(frozen=True)
class ListedDerivative:
    """One model the Hub lists under a base's family filter (`base_model:<relation>:<base>`)."""

    repo_id: str
    relation: str
    sha: str | None
    downloads: int


@dataclass(frozen=True)
class CardHead:
    """A head check that also reads the card's family tree: `base_model` as written (a repo id, a list, or
    anything a card may hold) and `base_model_relation`."""

    sha: str
    gated: str | bool | None
    downloads: int
    base_model: Any
    relation: Any
    last_modified: datetime | None = None  # when the repo last moved: the head's date, without a commits request


@dataclass(frozen=True)
class CommitInfo:
    sha: str
    title: str
    message: str
    authors: tuple[str, ...]
    created_at: datetime


@dataclass(frozen=True)
class CommitWalk:
    """Commits newest first, cut at the first one in `stop_at` (which is not included)."""

    commits: list[CommitInfo]
    stopped_at: str | None
    reached_until: bool = False  # the walk's `until` commit was met (and is the last of `commits`)


def default_cache_dir() -> str:
    """Where huggingface_hub keeps its cache: HF_HUB_CACHE, else HF_HOME/hub, else ~/.cache/huggingface/hub
    (read by the library when it is imported). `tracker.pins.cache_scan` reads it."""
    from huggingface_hub import constants

    return str(constants.HF_HUB_CACHE)


def install_budget(budget: RequestBudget, endpoint: str) -> None:
    """Every request the library makes to `endpoint` from now on, in this process, first takes its turn
    from `budget` (waiting when its pool is spent), and every answer's RateLimit headers update it. Hooks
    on the library's shared HTTP client (`get_session`): one budget for every job of the process."""
    from huggingface_hub.utils import get_session

    from tracker.polling.budget import pool_of

    host = httpx2.URL(endpoint).host

    def before(request: httpx2.Request) -> None:
        if request.url.host == host:
            budget.acquire(pool_of(request.url.path))

    def after(response: httpx2.Response) -> None:
        if response.request.url.host == host:
            budget.observe(pool_of(response.request.url.path), ratelimit_of(response.headers))

    before._hubwatch_budget = after._hubwatch_budget = True  # type: ignore[attr-defined]
    kept = _hooks_without_budget()
    get_session().event_hooks = {"request": [*kept["request"], before], "response": [*kept["response"], after]}


_COUNTED: ContextVar[tuple[str, list[int]] | None] = ContextVar("hubwatch_counted_requests", default=None)
_COUNTING_LOCK = threading.Lock()


def _count_request(request: httpx2.Request) -> None:
    counting = _COUNTED.get()
    if counting is not None and request.url.host == counting[0]:
        counting[1][0] += 1


@contextmanager
def counting_requests(endpoint: str) -> Iterator[list[int]]:
    """Count the library's HTTP requests to `endpoint`'s host (what the request budget counts; not a CDN's) sent
    from this thread (this context) while inside: `[n]`, read after. A hook on the library's shared client, added
    once; requests of other threads are not counted."""
    from huggingface_hub.utils import get_session

    session = get_session()
    with _COUNTING_LOCK:  # added once, whichever thread comes first
        if _count_request not in session.event_hooks.get("request", []):
            session.event_hooks = {**session.event_hooks, "request": [*session.event_hooks.get("request", []), _count_request]}
    counted = [0]
    token = _COUNTED.set((httpx2.URL(endpoint).host, counted))
    try:
        yield counted
    finally:
        _COUNTED.reset(token)


def ratelimit_of(headers: Mapping[str, str]) -> HubRateLimit | None:
    """What an answer's `RateLimit` / `RateLimit-Policy` headers say, parsed by the library; None without them."""
    from huggingface_hub.utils import parse_ratelimit_headers

    from tracker.polling.budget import HubRateLimit

    info = parse_ratelimit_headers(headers)
    if info is None:
        return None
    return HubRateLimit(info.remaining, float(info.reset_in_seconds), info.limit, info.window_seconds)


def remove_budget() -> None:
    """Undo `install_budget`: the library's requests are no longer counted or held back."""
    from huggingface_hub.utils import get_session

    get_session().event_hooks = _hooks_without_budget()


def _hooks_without_budget() -> dict[str, list[Any]]:
    from huggingface_hub.utils import get_session

    hooks = get_session().event_hooks
    return {kind: [h for h in hooks.get(kind, []) if not getattr(h, "_hubwatch_budget", False)] for kind in ("request", "response")}


class MissingFile(Exception):
    """The tree lists the file but the Hub answers 404 for it."""


class HubClient:
    def __init__(self, endpoint: str, token: str | None = None, timeout_s: float = 30.0) -> None:
        disable_progress_bars()
        self.endpoint = endpoint.rstrip("/")
        self._token: str | bool = token or False
        self.timeout_s = timeout_s
        self.api = HfApi(endpoint=self.endpoint, token=self._token)

    def head(self, repo_id: str, branch: str) -> RepoHead:
        """The branch's head commit: exactly one request. `repo_id` is a stored key: a model's `org/name` or a
        dataset's `datasets/org/name` (storage.kinds.repo_key), and so is the answered `repo_id`. A dataset's canonical
        short name (`datasets/wikitext`) is asked as such: the answered `repo_id` is the org name it redirects to."""
        repo_type, hub_id = split_repo_key(repo_id)
        if repo_id.startswith("datasets/") and (short := short_dataset_name(repo_id)) is not None:
            repo_type, hub_id = "dataset", short
        try:
            info = self.api.repo_info(
                hub_id,
                repo_type=repo_type,
                revision=branch,
                expand=["sha", "private", "gated", "lastModified"],
                timeout=self.timeout_s,
            )
        except RevisionNotFoundError as err:
            raise BranchMissing(f"{repo_id}: the branch {branch} does not exist on the Hub (deleted?)") from err
        except Exception as err:  # noqa: BLE001 - every library error is translated in one place
            _translate(err, repo_id, f"head of {branch}", token_sent=bool(self._token))
        if not info.sha:
            raise HubUnavailable(f"{repo_id}: the Hub returned no commit for {branch}")
        uid = vars(info).get("_id")  # kept by ModelInfo / DatasetInfo among the keys they do not name
        return RepoHead(sha=info.sha, private=info.private, gated=info.gated, last_modified=info.last_modified,
                        repo_id=repo_key(info.id, repo_type) if info.id else None, uid=uid if isinstance(uid, str) else None)

    def check_file_access(self, repo_id: str, sha: str, path: str = "config.json") -> None:
        """Whether this token may read the repo's files (a gated repo's are refused until access is granted): one
        read of one byte of `path`. Raises RepoGated when refused; a file the repo lacks says nothing against it."""
        try:
            self.download(repo_id, sha, path, max_bytes=1)
        except MissingFile:
            pass

    def list_models_by_modification(self, author: str | None = None, repo_type: str = "model") -> Iterator[ListedModel]:
        """Models (or, with `repo_type="dataset"`, datasets keyed `datasets/org/name`), most recently modified
        first (all of `author`'s when named), with their commit.

        Pages (1,000 entries each on the Hub) are asked for one at a time as the caller iterates: stop
        iterating and no further page is requested. Errors are ours (HubUnavailable, RateLimited...)."""
        lister = self.api.list_datasets if repo_type == "dataset" else self.api.list_models
        try:
            listed = lister(author=author, sort="last_modified", expand=["sha", "lastModified"], token=self._token)
            for info in listed:
                yield ListedModel(repo_id=repo_key(info.id, repo_type), sha=info.sha, last_modified=info.last_modified)
        except _HUB_ERRORS as err:
            _translate(err, author or "the Hub", f"list {repo_type}s")

    def list_derivatives(self, base: str, relation: str, limit: int) -> list[ListedDerivative]:
        """The models whose card names `base` with `relation`, most downloaded first, at most `limit` (one
        listing request for up to 1,000: the Hub's page)."""
        try:
            models = self.api.list_models(filter=f"base_model:{relation}:{base}", sort="downloads", limit=limit,
                                          expand=["sha", "downloads"], token=self._token)
            return [ListedDerivative(info.id, relation, info.sha, int(info.downloads or 0)) for info in models]
        except _HUB_ERRORS as err:
            _translate(err, base, f"list {relation} derivatives")

    def card_head(self, repo_id: str) -> CardHead:
        """The default branch's head with the card's family tree: exactly one request."""
        try:
            info = self.api.model_info(repo_id, expand=["sha", "gated", "downloads", "cardData", "lastModified"],
                                       timeout=self.timeout_s)
        except Exception as err:  # noqa: BLE001 - every library error is translated in one place
            _translate(err, repo_id, "head and card")
        if not info.sha:
            raise HubUnavailable(f"{repo_id}: the Hub returned no commit")
        card = info.card_data
        return CardHead(info.sha, info.gated, int(info.downloads or 0), getattr(card, "base_model", None),
                        getattr(card, "base_model_relation", None), info.last_modified)

    def repo_exists(self, repo_id: str) -> bool:
        """Whether the Hub has the model or dataset (a gated or private one it refuses to show counts as there): one
        request."""
        repo_type, hub_id = split_repo_key(repo_id)
        try:
            return bool(self.api.repo_exists(hub_id, repo_type=repo_type, token=self._token))
        except Exception as err:  # noqa: BLE001 - every library error is translated in one place
            _translate(err, repo_id, "check it exists")

    def walk_commits(
        self, repo_id: str, head_sha: str, stop_at: set[str], limit: int | None = None, until: str | None = None
    ) -> CommitWalk:
        """Commits reachable from `head_sha`, newest first, until one in `stop_at` or `limit` of them, or
        up to and including the commit `until` (`reached_until` says whether it was met).

        Pages are requested one at a time and no further than needed (`list_repo_commits` always walks
        the whole history)."""
        repo_type, hub_id = split_repo_key(repo_id)
        url = f"{self.endpoint}/api/{repo_type}s/{hub_id}/commits/{quote(head_sha, safe='')}"
        commits: list[CommitInfo] = []
        try:
            for item in paginate(url, params={}, headers=build_hf_headers(token=self._token)):
                sha = item["id"]
                if sha in stop_at:
                    return CommitWalk(commits, sha)
                commits.append(_commit_info(item))
                if sha == until:
                    return CommitWalk(commits, None, reached_until=True)
                if limit is not None and len(commits) >= limit:
                    break
        except _HUB_ERRORS as err:
            _translate(err, repo_id, "list commits")
        return CommitWalk(commits, None)

    def conversion_commit(self, repo_id: str) -> CommitInfo | None:
        """The commit the dataset viewer's Parquet conversion (`refs/convert/parquet`) is at, with its date; None
        when the dataset has none. Two requests: the refs, then the conversion's commit."""
        repo_type, hub_id = split_repo_key(repo_id)
        try:
            refs = self.api.list_repo_refs(hub_id, repo_type=repo_type)
        except _HUB_ERRORS as err:
            _translate(err, repo_id, "list refs")
        target = next((c.target_commit for c in refs.converts if c.ref == CONVERT_REF), None)
        if target is None:
            return None
        walk = self.walk_commits(repo_id, target, set(), limit=1)
        return walk.commits[0] if walk.commits else None

    def list_files(self, repo_id: str, sha: str) -> list[FileEntry]:
        """Every file of the commit's tree, with blob oids and LFS sha256."""
        try:
            repo_type, hub_id = split_repo_key(repo_id)
            entries = list(self.api.list_repo_tree(hub_id, revision=sha, recursive=True, repo_type=repo_type))
        except _HUB_ERRORS as err:
            _translate(err, repo_id, f"list files at {sha[:12]}")
        files = []
        for entry in entries:
            if not isinstance(entry, RepoFile):
                continue
            lfs = entry.lfs
            files.append(
                FileEntry(
                    path=entry.path,
                    oid=entry.blob_id,
                    size=entry.size,
                    lfs_sha256=lfs.sha256 if lfs else None,
                    lfs_size=lfs.size if lfs else None,
                )
            )
        return sorted(files, key=lambda f: f.path)

    def download(self, repo_id: str, sha: str, path: str, max_bytes: int | None = None) -> bytes:
        """One file's bytes at a commit: one GET of `resolve/<sha>/<path>` through the library's HTTP session (its
        headers and token, the request budget's hooks, its error mapping), no scratch directory. Raises MissingFile
        when the Hub answers 404 for it. `max_bytes` (the tree's size) cuts a longer body: the caller checks the bytes
        against the tree's blob oid."""
        from huggingface_hub.utils import get_session, hf_raise_for_status

        url = _file_url(repo_id, path, sha, self.endpoint)
        what = f"download {path} at {sha[:12]}"
        try:
            with get_session().stream("GET", url, headers=build_hf_headers(token=self._token), follow_redirects=True,
                                      timeout=self.timeout_s) as response:
                if response.status_code >= 400:
                    response.read()
                    hf_raise_for_status(response)
                return _read_body(response, max_bytes)
        except EntryNotFoundError as err:
            raise MissingFile(f"{path} is listed at {sha[:12]} but the Hub answers 404") from err
        except _HUB_ERRORS as err:
            _translate(err, repo_id, what)

    def open_range(self, repo_id: str, sha: str, path: str, size: int, budget: int = DEFAULT_BUDGET,
                   first_block: int | None = None, max_block: int | None = None) -> HubRangeSource:
        """The file at the commit as a RangeSource: its bytes fetched on demand by HTTP Range (`resolve`),
        read ahead in growing blocks (the first `first_block` bytes long, default 1 MiB, doubling up to
        `max_block`, default 4 MiB), never more than `budget` bytes in all. A reader that asks for exactly
        what it needs (a zip's records) passes small blocks. Requests go through the library's HTTP session
        (token, request budget hooks); Hub errors are ours (`_translate`)."""
        url = _file_url(repo_id, path, sha, self.endpoint)
        return HubRangeSource(url, size, budget, lambda: build_hf_headers(token=self._token),
                              f"{repo_id}: {path} at {sha[:12]}", repo_id, self.timeout_s, first_block or FIRST_BLOCK,
                              max_block or MAX_BLOCK)

    def safetensors_manifest(self, repo_id: str, sha: str, path: str) -> WeightManifest:
        """A safetensors file's header, read by HTTP Range; a malformed header is a manifest error."""
        try:
            repo_type, hub_id = split_repo_key(repo_id)
            meta = self.api.parse_safetensors_file_metadata(hub_id, path, revision=sha, repo_type=repo_type)
        except SafetensorsParsingError as err:
            # The library's message repeats repo, file and revision before "): "; keep the reason.
            reason = _first_line(err).rsplit("): ", 1)[-1]
            return WeightManifest(error=reason)
        except _HUB_ERRORS as err:
            _translate(err, repo_id, f"read the header of {path} at {sha[:12]}")
        tensors = tuple(
            TensorInfo(name=name, dtype=info.dtype, shape=tuple(int(d) for d in info.shape))
            for name, info in sorted(meta.tensors.items())
        )
        return WeightManifest(tensors=tensors, metadata=dict(meta.metadata or {}))


CONVERT_REF = "refs/convert/parquet"  # where the dataset viewer commits its Parquet conversion of a dataset
FIRST_BLOCK = 2**20  # the first read-ahead; each further fetch doubles it (up to MAX_BLOCK)
MAX_BLOCK = 4 * 2**20  # a header past it costs one request per 4 MiB; the overshoot stays under 4 MiB


class HubRangeSource(CountedSource):
    """A Hub file read by HTTP Range (see `HubClient.open_range`). Fetched bytes are kept as segments; a read
    they do not cover fetches from its offset a block at least as long as asked (`first_block`, doubling up
    to `max_block`), and never into bytes already held. A server
    that ignores Range (200 with the whole body) is streamed from the start and cut once the bytes asked
    for, or the budget, are reached: the bytes before the offset count as read too."""

    def __init__(self, url: str, size: int, budget: int, headers: Any, what: str, repo_id: str, timeout_s: float,
                 first_block: int = FIRST_BLOCK, max_block: int = MAX_BLOCK) -> None:
        super().__init__(size, budget)
        self.url = url
        self._headers, self._what, self._repo_id, self._timeout_s = headers, what, repo_id, timeout_s
        self._block, self._max_block = max(first_block, 1), max(max_block, 1)
        self._segments: list[tuple[int, bytes]] = []  # (offset, bytes), sorted, not overlapping
        self.requests = 0

    def _take(self, offset: int, stop: int) -> bytes:
        out = bytearray()
        at = offset
        while at < stop:
            held = self._held(at)
            if held is not None:
                start, data = held
                piece = data[at - start : stop - start]
                out += piece
                at += len(piece)
                continue
            self._fetch(at, stop - at)
        return bytes(out)

    def _held(self, at: int) -> tuple[int, bytes] | None:
        for start, data in self._segments:
            if start <= at < start + len(data):
                return start, data
        return None

    def _fetch(self, at: int, needed: int) -> None:
        """Fetch bytes from `at`: at least `needed`, ahead to the block size, within the budget and the file."""
        left = self.budget - self._read
        if needed > left:
            raise OverBudget(self._read + needed, self.budget)
        nxt = min((s for s, _ in self._segments if s > at), default=self._size)
        want = min(max(needed, self._block), left, nxt - at)
        self._block = min(self._block * 2, self._max_block)
        data = self._get(at, want)
        if len(data) < min(needed, want):
            raise RangeError(f"{self._what}: the server sent {len(data):,} bytes at {at:,}, {needed:,} were asked")
        self._segments.append((at, data))
        self._segments.sort()

    def _get(self, at: int, want: int) -> bytes:
        from huggingface_hub.utils import get_session, hf_raise_for_status

        headers = {**self._headers(), "Range": f"bytes={at}-{at + want - 1}"}
        self.requests += 1
        try:
            with get_session().stream("GET", self.url, headers=headers, follow_redirects=True,
                                      timeout=self._timeout_s) as response:
                if response.status_code == 416:
                    raise RangeError(f"{self._what}: the server cannot serve bytes {at:,}+{want:,} (416)")
                if response.status_code >= 400:
                    response.read()
                    hf_raise_for_status(response)
                if response.status_code == 206:
                    first = _content_range_start(response.headers.get("Content-Range", ""))
                    if first != at:
                        raise RangeError(f"{self._what}: asked for bytes from {at:,}, the server sent from {first}")
                    return self._stream(response, 0, want)
                return self._stream(response, at, want)  # 200: Range ignored, the whole file comes
        except EntryNotFoundError as err:
            raise RangeError(f"{self._what} is listed but the Hub answers 404") from err
        except _HUB_ERRORS as err:
            _translate(err, self._repo_id, f"read {self._what} by range")

    def _stream(self, response: httpx2.Response, skip: int, want: int) -> bytes:
        """Read `skip` bytes (dropped) then `want` bytes of the body, and no more; all count as read."""
        out = bytearray()
        limit = skip + want
        got = 0
        for chunk in response.iter_bytes():
            if got + len(chunk) > limit:
                chunk = chunk[: limit - got]
            if got + len(chunk) > skip:
                out += chunk[max(0, skip - got) :]
            got += len(chunk)
            if self._read + got > self.budget:
                self._read += got
                raise OverBudget(self._read, self.budget)
            if got >= limit:
                break
        self._read += got
        return bytes(out)


def _file_url(key: str, path: str, sha: str, endpoint: str) -> str:
    """The `resolve` URL of a file of the model or dataset the stored key names."""
    repo_type, hub_id = split_repo_key(key)
    return hf_hub_url(hub_id, path, revision=sha, endpoint=endpoint, repo_type=repo_type)


def _read_body(response: httpx2.Response, max_bytes: int | None) -> bytes:
    """The body, cut one byte past `max_bytes` (None: no limit): a body longer than the tree says cannot match
    its blob oid, and is not read to its end."""
    out = bytearray()
    for chunk in response.iter_bytes():
        out += chunk
        if max_bytes is not None and len(out) > max_bytes:
            return bytes(out[: max_bytes + 1])
    return bytes(out)


def _content_range_start(value: str) -> int | None:
    """The first byte of a `Content-Range: bytes a-b/size` header, or None when it is not that."""
    try:
        unit, _, rest = value.partition(" ")
        return int(rest.split("-", 1)[0]) if unit == "bytes" else None
    except ValueError:
        return None


def _commit_info(item: dict[str, Any]) -> CommitInfo:
    from huggingface_hub.utils import parse_datetime

    return CommitInfo(
        sha=item["id"],
        title=item.get("title", ""),
        message=item.get("message", ""),
        authors=tuple(a.get("user", "") for a in item.get("authors", [])),
        created_at=parse_datetime(item["date"]),
    )


def _translate(err: Exception, repo_id: str, what: str, token_sent: bool | None = None) -> NoReturn:
    """Map a library error to ours; the one place that knows the library's exception classes. `token_sent`:
    whether the request carried a token (None: read off the request the error answers)."""
    if isinstance(err, GatedRepoError):
        raise RepoGated(f"{repo_id} is gated: request access on the Hub and set the token variable") from err
    if isinstance(err, DisabledRepoError):
        raise RepoDisabled(f"{repo_id} was disabled by the Hub (\"Access to this resource is disabled.\"): "
                           "nothing of it can be read until the Hub restores it") from err
    if isinstance(err, RepositoryNotFoundError):
        if token_sent is None:
            token_sent = _sent_a_token(err)
        if token_sent:
            raise RepoGone(f"{repo_id} does not exist on the Hub, or is private and this token has no access to it "
                           "(the Hub answers both alike)", token_sent=True) from err
        raise RepoGone(f"{repo_id} does not exist on the Hub, or is private: without a token the two look alike "
                       "(set the token variable to one with access to tell)", token_sent=False) from err
    if isinstance(err, RevisionNotFoundError):
        raise RevisionMissing(f"{repo_id}: revision not found ({what})") from err
    if isinstance(err, HfHubHTTPError):
        status = err.response.status_code if err.response is not None else None
        if status == 429:
            raise RateLimited(f"{repo_id}: rate limited by the Hub ({what})", _retry_after(err)) from err
        raise HubUnavailable(f"{repo_id}: the Hub answered {status} ({what})") from err
    if isinstance(err, OSError) and err.errno in _LOCAL_DISK_ERRNOS:
        raise err
    if isinstance(err, httpx2.TimeoutException):
        raise HubUnavailable(f"{repo_id}: the Hub did not answer in time ({what}): {_first_line(err)}") from err
    if isinstance(err, _TRANSPORT_ERRORS):
        raise HubUnavailable(f"{repo_id}: cannot reach the Hub ({what}): {_first_line(err)}") from err
    raise err


def _sent_a_token(err: HfHubHTTPError) -> bool:
    """Whether the request the error answers carried a token."""
    try:
        return err.response is not None and "authorization" in err.response.request.headers
    except RuntimeError:  # a response built without its request
        return False


def _retry_after(err: HfHubHTTPError) -> float | None:
    """How long the Hub asked us to wait: its `RateLimit` header's `t=` (plus a second), else `Retry-After`."""
    headers = err.response.headers if err.response is not None else {}
    ratelimit = headers.get("RateLimit", "")
    for part in ratelimit.split(";"):
        part = part.strip()
        if part.startswith("t="):
            try:
                return float(part[2:]) + 1
            except ValueError:
                return None
    return retry_after_s(headers.get("Retry-After"))


def _first_line(err: BaseException) -> str:
    return (str(err).strip().splitlines() or [type(err).__name__])[0][:300]
