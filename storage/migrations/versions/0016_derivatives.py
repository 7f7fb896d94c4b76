"""A base's followed family (issue 24): derivative_follow (relations, cap, last announced base revision)
and derivative (each derivative's head, behaviour parts and their lineage against the base).

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-08 10:00:00.000000
"""

import sqlalchemy as sa
import sqlmodel
from alembic import op

import storage.types

revision = '0016'
down_revision = '0015'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'derivative_follow',
        sa.Column('base_repo_id', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
        sa.Column('relations', sa.JSON(), nullable=False),
        sa.Column('max_derivatives', sa.Integer(), nullable=False),
        sa.Column('source', sqlmodel.sql.sqltypes.AutoString(length=20), nullable=False),
        sa.Column('created_at', storage.types.UTCDateTime(timezone=True), nullable=False),
        sa.Column('announced_sha', sqlmodel.sql.sqltypes.AutoString(length=40), nullable=True),
        sa.Column('last_pass_at', storage.types.UTCDateTime(timezone=True), nullable=True),
        sa.Column('last_error', sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column('last_report', sa.JSON(), nullable=True),
        sa.PrimaryKeyConstraint('base_repo_id'),
    )
    op.create_table(
        'derivative',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('base_repo_id', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
        sa.Column('repo_id', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
        sa.Column('relation', sqlmodel.sql.sqltypes.AutoString(length=20), nullable=False),
        sa.Column('downloads', sa.Integer(), nullable=False),
        sa.Column('head_sha', sqlmodel.sql.sqltypes.AutoString(length=40), nullable=True),
        sa.Column('sources', sa.JSON(), nullable=False),
        sa.Column('parts', sa.JSON(), nullable=False),
        sa.Column('lineage', sa.JSON(), nullable=False),
        sa.Column('problem', sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column('listed', sa.Boolean(), nullable=False),
        sa.Column('first_seen_at', storage.types.UTCDateTime(timezone=True), nullable=False),
        sa.Column('checked_at', storage.types.UTCDateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('base_repo_id', 'repo_id', name='uq_derivative_base_repo'),
    )
    op.create_index(op.f('ix_derivative_base_repo_id'), 'derivative', ['base_repo_id'], unique=False)


def downgrade() -> None:
    op.drop_index(op.f('ix_derivative_base_repo_id'), table_name='derivative')
    op.drop_table('derivative')
    op.drop_table('derivative_follow')
