"""What the table modules share: the base of their tables, the column helpers of their fields, and the bounds
other modules check against. Importing it defines no table (it loads no other module of the package)."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlmodel import Field, SQLModel

from storage.types import UTCDateTime

MAX_URL_LENGTH = 2000  # of a webhook subscription's URL


class Table(SQLModel):
    """The base of every table. Pydantic builds a table's validator and serializer when one is first used,
    not when the class is defined: rows are made and read through SQLAlchemy, and what validates input (the
    config, the API's models) is other models. Defining a table costs about a sixth less (0.7 of some 4.5 ms)."""

    model_config = {"defer_build": True}


def _utc(nullable: bool = False, index: bool = False) -> Any:
    return Field(default=None, sa_column=sa.Column(UTCDateTime(), nullable=nullable, index=index))


def _json(nullable: bool = False) -> Any:
    return Field(default=None, sa_column=sa.Column(sa.JSON(), nullable=nullable))


def _bigint(nullable: bool = False) -> Any:
    return Field(default=None, sa_column=sa.Column(sa.BigInteger(), nullable=nullable))
