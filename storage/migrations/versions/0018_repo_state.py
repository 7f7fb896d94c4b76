"""What the Hub did to a watched repo itself (deleted or private, gated, disabled, a branch deleted): the state on
the watch with since when and its detail, and the history of its changes (the repo lifecycle issue).

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-04 17:10:00.000000
"""

import sqlalchemy as sa
import sqlmodel
from alembic import op

import storage.types

revision = '0018'
down_revision = '0017'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('watch') as batch:
        batch.add_column(sa.Column('repo_state', sqlmodel.sql.sqltypes.AutoString(length=20), nullable=False,
                                   server_default='active'))
        batch.add_column(sa.Column('state_since', storage.types.UTCDateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column('state_detail', sa.JSON(), nullable=True))
    op.create_table(
        'repo_state_change',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('repo_id', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
        sa.Column('branch', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
        sa.Column('state', sqlmodel.sql.sqltypes.AutoString(length=20), nullable=False),
        sa.Column('previous', sqlmodel.sql.sqltypes.AutoString(length=20), nullable=False),
        sa.Column('detail', sa.JSON(), nullable=True),
        sa.Column('changed_at', storage.types.UTCDateTime(timezone=True), nullable=False),
        sa.Column('event_id', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=True),
        sa.PrimaryKeyConstraint('id'),
    )
    op.create_index('ix_repo_state_change_repo_id', 'repo_state_change', ['repo_id'])


def downgrade() -> None:
    op.drop_index('ix_repo_state_change_repo_id', table_name='repo_state_change')
    op.drop_table('repo_state_change')
    with op.batch_alter_table('watch') as batch:
        batch.drop_column('state_detail')
        batch.drop_column('state_since')
        batch.drop_column('repo_state')
