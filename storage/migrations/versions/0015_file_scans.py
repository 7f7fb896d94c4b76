"""Per-file scans of weight formats read by range (GGUF headers, pickle imports), one row per content id.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-05 10:00:00.000000
"""

import sqlalchemy as sa
import sqlmodel
from alembic import op

import storage.types

revision = '0015'
down_revision = '0014'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'file_scan',
        sa.Column('content_id', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column('format', sqlmodel.sql.sqltypes.AutoString(length=20), nullable=False),
        sa.Column('result', sa.JSON(), nullable=False),
        sa.Column('rules_version', sqlmodel.sql.sqltypes.AutoString(length=40), nullable=True),
        sa.Column('bytes_read', sa.BigInteger(), nullable=False),
        sa.Column('note', sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column('scanned_oid', sqlmodel.sql.sqltypes.AutoString(length=40), nullable=True),
        sa.Column('read_at', storage.types.UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint('content_id'),
    )


def downgrade() -> None:
    op.drop_table('file_scan')
