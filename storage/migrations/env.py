"""Alembic environment: runs against the engine hubwatch hands over (see storage.db.alembic_config)."""

from alembic import context

from storage.models import load_all

config = context.config
engine = config.attributes["engine"]

with engine.connect() as connection:
    context.configure(
        connection=connection,
        target_metadata=load_all(),  # every table: the package defines each on first use
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()
    connection.commit()
