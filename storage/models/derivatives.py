"""A base's family: which relations of it are followed, the derivatives the Hub lists, and where each
derivative's behaviour parts stand against the base (store: storage/derivatives.py)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlmodel import Field

from storage.models.base import Table, _json, _utc


class DerivativeFollow(Table, table=True):
    """`watch add REPO --derivatives ...` / `[[watch]] derivatives`: the relations followed, the cap, and
    the last base revision whose reach was announced (revisions after it are announced once checked)."""

    __tablename__ = "derivative_follow"

    base_repo_id: str = Field(primary_key=True, max_length=200)
    relations: list[str] = _json()
    max_derivatives: int = 100
    source: str = Field(default="cli", max_length=20)
    created_at: datetime = _utc()
    announced_sha: str | None = Field(default=None, max_length=40)
    last_pass_at: datetime | None = _utc(nullable=True)
    last_error: str | None = None
    last_report: dict[str, Any] | None = _json(nullable=True)  # the last pass: counts, requests, problems


class Derivative(Table, table=True):
    """One derivative of a base as last checked: its head, its parts (digests, and the file oids they were
    read from) and each part's lineage against the base; `problem` says what could not be checked."""

    __tablename__ = "derivative"
    __table_args__ = (sa.UniqueConstraint("base_repo_id", "repo_id", name="uq_derivative_base_repo"),)

    id: int | None = Field(default=None, primary_key=True)
    base_repo_id: str = Field(index=True, max_length=200)
    repo_id: str = Field(max_length=200)
    relation: str = Field(max_length=20)
    downloads: int = 0
    head_sha: str | None = Field(default=None, max_length=40)
    sources: dict[str, Any] = _json()  # path -> oid of the files the parts were read from
    parts: dict[str, Any] = _json()  # part -> PartValue as a dict
    lineage: dict[str, Any] = _json()  # part -> PartLineage as a dict
    problem: str | None = None
    listed: bool = True  # False once the listing no longer names it (dropped under the cap, or gone)
    first_seen_at: datetime = _utc()
    checked_at: datetime | None = _utc(nullable=True)
