"""RSS 2.0 and Atom documents of events, built with feedgen (the only module that imports it).

A feed is one repo, one org, everything, or the security-relevant events, optionally narrowed by kind
and minimum severity. Entry ids are the event ids (`urn:uuid:`), an entry's dates are its event's, and
its content depends only on rows written with the event: an old entry is never rewritten. The
document is a function of (filter, the newest events it shows, templates, self link), which is what
the strong ETag hashes, so a conditional GET is answered from one index read of those events' ids,
whatever the length of the history, without reading a payload.
"""

from __future__ import annotations

import hashlib
import threading
import urllib.parse
import uuid
from collections import OrderedDict
from dataclasses import dataclass
from datetime import UTC, datetime

from feedgen.feed import FeedGenerator

from feeds.views.view_models import entry_view, render, templates_digest
from feeds.views.xml_text import visible
from storage.front import Storage
from storage.models import Event
from storage.read_model import EventFilter, EventHead, FeedState, ReadModel

FORMATS = ("atom", "rss")
MEDIA_TYPES = {"atom": "application/atom+xml", "rss": "application/rss+xml"}
DEFAULT_LIMIT = 50
MAX_LIMIT = 1000
SCOPES = ("repo", "org", "all", "security")
_FEED_NS = uuid.UUID("5b0a4c1e-3f7d-4e52-9a61-2c8e7d9f0b13")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

@dataclass(frozen=True)
class FeedRequest:
    """Which feed, in which format, narrowed how. `key` is the repo id or the org for those scopes."""

    scope: str
    fmt: str = "atom"
    key: str | None = None
    kinds: tuple[str, ...] = ()
    min_severity: str | None = None
    limit: int = DEFAULT_LIMIT
    token: str | None = None  # kept in the rel=self link of a private feed

    def __post_init__(self) -> None:
        if self.scope not in SCOPES or self.fmt not in FORMATS:
            raise ValueError(f"no {self.scope} feed in {self.fmt}")
        if (self.key is None) != (self.scope in ("all", "security")):
            raise ValueError(f"a {self.scope} feed {'needs' if self.key is None else 'takes no'} key")
        if not 1 <= self.limit <= MAX_LIMIT:
            raise ValueError(f"limit must be 1-{MAX_LIMIT}")
        object.__setattr__(self, "kinds", tuple(sorted(set(self.kinds))))

    @property
    def filter(self) -> EventFilter:
        return EventFilter(
            repo_id=self.key if self.scope == "repo" else None,
            org=self.key if self.scope == "org" else None,
            kinds=self.kinds,
            min_severity=self.min_severity,
            security_only=self.scope == "security",
        )

    @property
    def path(self) -> str:
        if self.scope == "repo":
            return f"/repos/{self.key}/feed.{self.fmt}"
        if self.scope == "org":
            return f"/orgs/{self.key}/feed.{self.fmt}"
        return f"/feeds/{self.scope}.{self.fmt}"

    @property
    def page_path(self) -> str:
        return f"/repos/{self.key}" if self.scope == "repo" else "/"

    def query(self, with_token: bool = True) -> str:
        """The canonical query string: the same filters always give the same self link."""
        params: list[tuple[str, str]] = [("kind", k) for k in self.kinds]
        if self.min_severity:
            params.append(("min_severity", self.min_severity))
        if self.limit != DEFAULT_LIMIT:
            params.append(("limit", str(self.limit)))
        if with_token and self.token:
            params.append(("token", self.token))
        return urllib.parse.urlencode(params)

    def self_url(self, base_url: str) -> str:
        query = self.query()
        return f"{base_url}{self.path}" + (f"?{query}" if query else "")

    @property
    def title(self) -> str:
        return {
            "repo": f"hubwatch: {self.key}",
            "org": f"hubwatch: every watched repo of {self.key}",
            "all": "hubwatch: every watched repo",
            "security": "hubwatch: security-relevant changes",
        }[self.scope]

    @property
    def subtitle(self) -> str:
        parts = ["What changed upstream, one entry per ingested revision or advisory"]
        if self.kinds:
            parts.append(f"kinds: {', '.join(self.kinds)}")
        if self.min_severity:
            parts.append(f"severity {self.min_severity} and above")
        return "; ".join(parts) + "."

    @property
    def feed_id(self) -> str:
        """Stable across hosts and restarts: the scope and filters, not the URL, name the feed."""
        return f"urn:uuid:{uuid.uuid5(_FEED_NS, f'{self.scope}|{self.key}|{self.query(with_token=False)}')}"

def entry_id(event_id: str) -> str:
    try:
        return f"urn:uuid:{uuid.UUID(event_id)}"
    except ValueError:
        return f"urn:hubwatch:event:{urllib.parse.quote(event_id, safe='')}"

class _Lru:
    """A small thread-safe LRU map (entries are immutable, so a hit is always right)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: OrderedDict[object, object] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: object) -> object | None:
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value

    def put(self, key: object, value: object) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)

@dataclass(frozen=True)
class RenderedFeed:
    body: bytes
    etag: str
    last_modified: datetime | None
    media_type: str

class FeedBuilder:
    """Feed documents from the event table, with per-entry and per-document caches."""

    def __init__(self, store: Storage, queries: ReadModel | None = None, entry_cache: int = 5000, doc_cache: int = 32) -> None:
        self.store = store
        self.queries = queries or store.read_model
        self._entries = _Lru(entry_cache)
        self._docs = _Lru(doc_cache)
        self._templates = templates_digest()

    def state(self, req: FeedRequest) -> FeedState:
        return self.queries.state(req.filter, req.limit)

    def etag(self, req: FeedRequest, state: FeedState, base_url: str) -> str:
        """A strong validator: equal only when the documents are byte for byte equal."""
        seqs = ",".join(str(head.seq) for head in state.heads)
        basis = "|".join([self._templates, req.fmt, req.self_url(base_url), req.feed_id, str(req.limit), seqs])
        return '"' + hashlib.sha256(basis.encode()).hexdigest()[:32] + '"'

    def build(self, req: FeedRequest, base_url: str, state: FeedState | None = None) -> RenderedFeed:
        state = state or self.state(req)
        tag = self.etag(req, state, base_url)
        cached = self._docs.get(tag)
        body = cached if isinstance(cached, bytes) else self.render(req, base_url, state)
        if cached is None:
            self._docs.put(tag, body)
        return RenderedFeed(body, tag, state.last_created_at, MEDIA_TYPES[req.fmt])

    def render(self, req: FeedRequest, base_url: str, state: FeedState) -> bytes:
        """The document itself, newest entry first (no document cache): the entries of `state`'s events."""
        heads = list(state.heads)
        entries = self._entries_for(heads)
        fg = FeedGenerator()
        fg.id(req.feed_id)
        fg.title(req.title)
        fg.description(req.subtitle)
        fg.author({"name": "hubwatch"})
        fg.link(href=f"{base_url}{req.page_path}", rel="alternate", type="text/html")
        fg.link(href=req.self_url(base_url), rel="self", type=MEDIA_TYPES[req.fmt])
        fg.generator("hubwatch")
        fg.language("en")
        updated = state.last_created_at or _EPOCH
        fg.updated(updated)
        fg.lastBuildDate(updated)
        for head in heads:
            entry = entries[head.seq]
            fe = fg.add_entry(order="append")
            fe.id(entry.id)
            fe.title(entry.title)
            fe.link(href=f"{base_url}{entry.page}", rel="alternate", type="text/html")
            fe.published(entry.created_at)
            fe.updated(entry.created_at)
            fe.summary(entry.summary)
            fe.content(entry.html, type="html")
            fe.category(entry.categories)
        return fg.atom_str(pretty=True) if req.fmt == "atom" else fg.rss_str(pretty=True)

    def warm(self, limit: int = 1000) -> int:
        """Render the newest events' entries ahead of any request, so no reader pays for a first render
        (events never change: an entry made once serves every feed it appears in). Returns how many
        entries were made; the daemon calls this at start and after each poll that stored revisions."""
        heads = self.queries.event_heads(EventFilter(), min(limit, self._entries.size))
        before = sum(1 for h in heads if self._entries.get(h.event_id) is not None)
        self._entries_for(heads)
        return len(heads) - before

    def _entries_for(self, heads: list[EventHead]) -> dict[int, _Entry]:
        """Each event's entry, made once per event and kept: events are never rewritten."""
        out: dict[int, _Entry] = {}
        missing: list[int] = []
        for head in heads:
            hit = self._entries.get(head.event_id)
            if isinstance(hit, _Entry):
                out[head.seq] = hit
            else:
                missing.append(head.seq)
        if missing:
            events = self.queries.events_by_seq(missing)
            revision_ids = [e.revision_id for e in events.values() if e.revision_id is not None]
            revisions = self.queries.revisions(revision_ids)
            changes = self.store.history.changes_by_revision(revision_ids)
            estimates = self.queries.estimates(revision_ids)
            for seq in missing:
                event = events[seq]
                rid = event.revision_id
                view = entry_view(
                    event,
                    revisions.get(rid) if rid is not None else None,
                    changes.get(rid, []) if rid is not None else [],
                    estimates.get(rid) if rid is not None else None,
                )
                entry = _Entry(
                    id=entry_id(event.event_id),
                    title=visible(event.title),
                    page=f"/repos/{event.repo_id}/revisions/{event.sha}" if event.sha else f"/repos/{event.repo_id}",
                    created_at=event.created_at,
                    summary=view.summary,
                    html=render("entry.html", entry=view),
                    categories=[{"term": term} for term in _categories(event)],
                )
                self._entries.put(event.event_id, entry)
                out[seq] = entry
        return out


@dataclass(frozen=True)
class _Entry:
    """Everything a feed entry holds, derived from rows written with its event only."""

    id: str
    title: str
    page: str
    created_at: datetime
    summary: str
    html: str
    categories: list[dict[str, str]]


def _categories(event: Event) -> list[str]:
    kinds = event.payload.get("kinds", []) if isinstance(event.payload, dict) else []
    terms = [event.kind, *(str(k) for k in kinds), f"severity:{event.severity}"]
    if event.security:
        terms.append("security")
    return list(dict.fromkeys(visible(t) for t in terms))

def http_date(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%a, %d %b %Y %H:%M:%S GMT")
