"""storage/models/: every table is named once in the package, and each module, loaded alone, can write its rows."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import storage.models
from storage.models import TABLES, load_all

ROOT = Path(__file__).resolve().parents[2]

# In a fresh process: import one table module alone, then resolve every foreign key on the metadata, as the
# ORM does when it first writes a row (a foreign key naming a table not defined yet raises there).
_RESOLVE = """
import importlib, sys
from sqlmodel import SQLModel
importlib.import_module("storage.models." + sys.argv[1])
for table in SQLModel.metadata.tables.values():
    for fk in table.foreign_keys:
        fk.column
print(len(SQLModel.metadata.tables))
"""


def test_the_package_names_every_table_once():
    """TABLES lists each table class of the schema once, under the module that defines it."""
    metadata = load_all()
    named = [name for names in TABLES.values() for name in names]
    assert len(named) == len(set(named))
    classes = {getattr(storage.models, name).__table__.name for name in named}
    assert classes == set(metadata.tables) and len(classes) == 29
    for module, names in TABLES.items():
        assert all(getattr(storage.models, name).__module__ == f"storage.models.{module}" for name in names)


def test_an_unknown_name_is_an_attribute_error():
    """A name the package does not define fails as a missing attribute does, naming it."""
    with pytest.raises(AttributeError, match="Nothing"):
        storage.models.Nothing  # noqa: B018 - the lookup is the test


@pytest.mark.parametrize("module", sorted(TABLES))
def test_a_table_module_alone_resolves_its_foreign_keys(module):
    """Each table module loads the modules of the tables its foreign keys name, so that the first write
    through it works in a process that loaded nothing else (`watch list`, `history`, the outbox)."""
    done = subprocess.run([sys.executable, "-c", _RESOLVE, module], cwd=ROOT, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) >= len(TABLES[module])
