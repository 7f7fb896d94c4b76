"""Alembic environment: runs against the engine hubwatch hands over (see storage.db.alembic_config)."""

from alembic import context
from sqlmodel import SQLModel

import storage.models  # noqa: F401 - imported for its tables: every one registers itself on SQLModel.metadata

config = context.config
engine = config.attributes["engine"]

with engine.connect() as connection:
    context.configure(
        connection=connection,
        target_metadata=SQLModel.metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()
    connection.commit()
