"""Estimates: the estimator's answer per revision.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29 15:49:17.207257
"""

import sqlalchemy as sa
import sqlmodel
from alembic import op

import storage.types

revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('estimate',
    sa.Column('revision_id', sa.Integer(), nullable=False),
    sa.Column('created_at', storage.types.UTCDateTime(timezone=True), nullable=False),
    sa.Column('parameters_total', sa.BigInteger(), nullable=True),
    sa.Column('result', sa.JSON(), nullable=True),
    sa.Column('error', sqlmodel.sql.sqltypes.AutoString(), nullable=True),
    sa.ForeignKeyConstraint(['revision_id'], ['revision.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('revision_id')
    )


def downgrade() -> None:
    op.drop_table('estimate')
