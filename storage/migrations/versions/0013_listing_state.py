"""Change detection by listing: the listing high-water mark per scope, author (org/user) watches, and
the Hub request budget shared by the processes of one database.

Revision ID: 0013
Revises: 0011
Create Date: 2026-11-30 17:00:00.000000
"""

import sqlalchemy as sa
import sqlmodel
from alembic import op

import storage.types

revision = '0013'
down_revision = '0011'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'author_watch',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('author', sqlmodel.sql.sqltypes.AutoString(length=100), nullable=False),
        sa.Column('interval_s', sa.Integer(), nullable=False),
        sa.Column('source', sqlmodel.sql.sqltypes.AutoString(length=20), nullable=False),
        sa.Column('created_at', storage.types.UTCDateTime(timezone=True), nullable=False),
        sa.Column('last_listed_at', storage.types.UTCDateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('author'),
    )
    op.create_table(
        'listing_state',
        sa.Column('scope', sqlmodel.sql.sqltypes.AutoString(length=120), nullable=False),
        sa.Column('high_water_at', storage.types.UTCDateTime(timezone=True), nullable=True),
        sa.Column('high_water_ids', sa.JSON(), nullable=False),
        sa.Column('passes', sa.Integer(), nullable=False),
        sa.Column('last_pass_at', storage.types.UTCDateTime(timezone=True), nullable=True),
        sa.Column('last_error', sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.PrimaryKeyConstraint('scope'),
    )
    op.create_table(
        'hub_budget',
        sa.Column('pool', sqlmodel.sql.sqltypes.AutoString(length=20), nullable=False),
        sa.Column('window_ends_at', storage.types.UTCDateTime(timezone=True), nullable=True),
        sa.Column('used', sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint('pool'),
    )


def downgrade() -> None:
    op.drop_table('hub_budget')
    op.drop_table('listing_state')
    op.drop_table('author_watch')
