"""What the table modules share: the column helpers of their fields, and the bounds other modules check against.

Importing it defines no table (`from storage.models.base import ...` loads no other module of the package)."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlmodel import Field

from storage.types import UTCDateTime

MAX_URL_LENGTH = 2000  # of a webhook subscription's URL


def _utc(nullable: bool = False, index: bool = False) -> Any:
    return Field(default=None, sa_column=sa.Column(UTCDateTime(), nullable=nullable, index=index))


def _json(nullable: bool = False) -> Any:
    return Field(default=None, sa_column=sa.Column(sa.JSON(), nullable=nullable))


def _bigint(nullable: bool = False) -> Any:
    return Field(default=None, sa_column=sa.Column(sa.BigInteger(), nullable=nullable))
