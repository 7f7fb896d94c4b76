"""The content-addressed blob store: bytes keyed by their git blob sha1, zlib-compressed.

File contents live here, and so do derived JSON documents that repeat from revision to revision
(advisory facts and advice): an unchanged document costs nothing the second time.
"""

from __future__ import annotations

import hashlib
import json
import zlib
from collections.abc import Iterable
from typing import Any

from sqlmodel import Session, col, select

from storage.models import Blob
from storage.sessions import insert_new


def git_blob_oid(data: bytes) -> str:
    """The git blob sha1 of `data`, which is what the Hub's tree calls a file's oid."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def add_blobs(session: Session, blobs: dict[str, bytes]) -> None:
    """Add the blobs the store does not hold yet (in the caller's transaction)."""
    if not blobs:
        return
    # Blobs added earlier in this session may not be flushed yet (writers run with autoflush off):
    # remember them on the session, which lives for one transaction.
    pending: set[str] = session.info.setdefault("hubwatch_pending_blobs", set())
    wanted = set(blobs) - pending
    if not wanted:
        return
    present = set(session.exec(select(Blob.oid).where(col(Blob.oid).in_(wanted))))
    # another worker may be adding the same content right now (two repos with one config): skipped, not an error
    insert_new(session, Blob.__table__, [  # type: ignore[attr-defined]
        {"oid": oid, "size": len(blobs[oid]), "encoding": "zlib", "data": zlib.compress(blobs[oid], 9)}
        for oid in wanted - present], key=lambda row: row["oid"])
    pending.update(wanted)


def read_blobs(session: Session, oids: Iterable[str]) -> dict[str, bytes]:
    wanted = set(oids)
    if not wanted:
        return {}
    return {row.oid: decode_blob(row) for row in session.exec(select(Blob).where(col(Blob.oid).in_(wanted)))}


def decode_blob(row: Blob) -> bytes:
    if row.encoding == "zlib":
        return zlib.decompress(row.data)
    if row.encoding == "raw":
        return row.data
    raise ValueError(f"blob {row.oid} has an unknown encoding {row.encoding!r}")


def put_json(session: Session, value: Any) -> str:
    """Store a JSON document by content (canonical form) and return its oid."""
    return put_jsons(session, [value])[0]


def put_jsons(session: Session, values: list[Any]) -> list[str]:
    """Store JSON documents by content (canonical form), looked up in one query; their oids, in order."""
    docs = [json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8") for v in values]
    oids = [git_blob_oid(data) for data in docs]
    add_blobs(session, dict(zip(oids, docs, strict=True)))
    return oids


def read_json(session: Session, oids: Iterable[str | None]) -> dict[str, Any]:
    return {oid: json.loads(data) for oid, data in read_blobs(session, (o for o in oids if o)).items()}
