"""A renamed repo's history moves to its new name; the old name is kept as an alias readers answer under (the
repo lifecycle issue: renames).

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-05 07:00:00.000000
"""

import sqlalchemy as sa
import sqlmodel
from alembic import op

import storage.types

revision = '0019'
down_revision = '0018'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'repo_alias',
        sa.Column('old_repo_id', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
        sa.Column('repo_id', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
        sa.Column('uid', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=True),
        sa.Column('moved_at', storage.types.UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint('old_repo_id'),
    )
    op.create_index('ix_repo_alias_repo_id', 'repo_alias', ['repo_id'])


def downgrade() -> None:
    op.drop_index('ix_repo_alias_repo_id', table_name='repo_alias')
    op.drop_table('repo_alias')
