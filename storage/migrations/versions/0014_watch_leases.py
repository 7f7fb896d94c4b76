"""Several workers on one database: each watch's next poll and the lease of the worker polling it, and
the leases of periodic jobs (the listing pass, the OSV re-check) that one worker at a time runs.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-30 19:30:00.000000
"""

import sqlalchemy as sa
import sqlmodel
from alembic import op

import storage.types

revision = '0014'
down_revision = '0013'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column('watch', sa.Column('next_poll_at', storage.types.UTCDateTime(timezone=True), nullable=True))
    op.add_column('watch', sa.Column('leased_by', sqlmodel.sql.sqltypes.AutoString(length=80), nullable=True))
    op.add_column('watch', sa.Column('lease_until', storage.types.UTCDateTime(timezone=True), nullable=True))
    op.create_index('ix_watch_next_poll_at', 'watch', ['next_poll_at'])
    op.create_table(
        'job_lease',
        sa.Column('name', sqlmodel.sql.sqltypes.AutoString(length=60), nullable=False),
        sa.Column('holder', sqlmodel.sql.sqltypes.AutoString(length=80), nullable=True),
        sa.Column('lease_until', storage.types.UTCDateTime(timezone=True), nullable=True),
        sa.Column('last_run_at', storage.types.UTCDateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint('name'),
    )


def downgrade() -> None:
    op.drop_table('job_lease')
    op.drop_index('ix_watch_next_poll_at', table_name='watch')
    with op.batch_alter_table('watch') as batch:
        batch.drop_column('lease_until')
        batch.drop_column('leased_by')
        batch.drop_column('next_poll_at')
