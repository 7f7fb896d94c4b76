"""Every table, in one place: one module per concern, each table's name resolved here on first use.

    from storage.models import Watch      # defines the tables of storage/models/watches.py, and no others

A command loads only the tables it touches (`hubwatch watch list` never defines the history, outbox or
advisory tables: each costs milliseconds). What needs the whole schema (Alembic's env, the test that the
migrations match the tables) calls `load_all()`. Every change to a table comes with an Alembic migration
(storage/migrations/versions); the stores that read and write them are the other storage modules.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import sqlalchemy as sa

# The tables of each module.
TABLES = {
    "watches": ("Watch", "AuthorWatch", "ListingState", "RepoStateChange", "RepoAlias"),
    "subscriptions": ("Subscription",),
    "workers": ("HubBudgetWindow", "JobLease"),
    "history": (
        "Revision", "Blob", "RevisionFile", "WeightFile", "WeightTensor", "FileScan", "ChangeRecord", "Event", "RepoSummaryRow",
        "EstimateRecord",
    ),
    "outbox": ("Delivery", "DeliveryAttempt"),
    "derivatives": ("DerivativeFollow", "Derivative"),
    "advisories": (
        "RevisionFacts", "OsvRecord", "AdvisoryLink", "OwnAdvisory", "AdvisoryState", "AdvisoryRecheck", "AdvisoryPending",
    ),
}
# Each name of the package, and the module that defines it.
_HOMES = {"MAX_URL_LENGTH": "base"} | {name: module for module, names in TABLES.items() for name in names}
__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    """`storage.models.Watch`: imports the module that defines it (PEP 562), once."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_HOMES))


def load_all() -> sa.MetaData:
    """Define every table, and return the metadata that holds them (SQLModel.metadata)."""
    from sqlmodel import SQLModel

    for module in TABLES:
        importlib.import_module(f"{__name__}.{module}")
    return SQLModel.metadata
