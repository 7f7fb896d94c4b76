"""Outbox: webhook subscriptions, one delivery per (event, subscription), and every delivery attempt.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-29 15:59:35.430904
"""

import sqlalchemy as sa
import sqlmodel
from alembic import op

import storage.types

revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('subscription',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('url', sqlmodel.sql.sqltypes.AutoString(length=2000), nullable=False),
    sa.Column('format', sqlmodel.sql.sqltypes.AutoString(length=10), nullable=False),
    sa.Column('secret_env', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=True),
    sa.Column('secret', sqlmodel.sql.sqltypes.AutoString(length=1000), nullable=True),
    sa.Column('repos', sa.JSON(), nullable=False),
    sa.Column('kinds', sa.JSON(), nullable=False),
    sa.Column('min_severity', sqlmodel.sql.sqltypes.AutoString(length=10), nullable=False),
    sa.Column('source', sqlmodel.sql.sqltypes.AutoString(length=10), nullable=False),
    sa.Column('enabled', sa.Boolean(), nullable=False),
    sa.Column('disabled_reason', sqlmodel.sql.sqltypes.AutoString(), nullable=True),
    sa.Column('created_at', storage.types.UTCDateTime(timezone=True), nullable=False),
    sa.Column('backoff_until', storage.types.UTCDateTime(timezone=True), nullable=True),
    sa.Column('removed_at', storage.types.UTCDateTime(timezone=True), nullable=True),
    sa.PrimaryKeyConstraint('id'),
    sqlite_autoincrement=True
    )
    op.create_table('delivery',
    sa.Column('id', sqlmodel.sql.sqltypes.AutoString(length=40), nullable=False),
    sa.Column('subscription_id', sa.Integer(), nullable=False),
    sa.Column('event_seq', sa.Integer(), nullable=False),
    sa.Column('event_id', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
    sa.Column('status', sqlmodel.sql.sqltypes.AutoString(length=10), nullable=False),
    sa.Column('attempts', sa.Integer(), nullable=False),
    sa.Column('next_attempt_at', storage.types.UTCDateTime(timezone=True), nullable=True),
    sa.Column('last_attempt_at', storage.types.UTCDateTime(timezone=True), nullable=True),
    sa.Column('last_status_code', sa.Integer(), nullable=True),
    sa.Column('last_error', sqlmodel.sql.sqltypes.AutoString(), nullable=True),
    sa.Column('created_at', storage.types.UTCDateTime(timezone=True), nullable=False),
    sa.Column('delivered_at', storage.types.UTCDateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['event_seq'], ['event.seq'], ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['subscription_id'], ['subscription.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('delivery', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_delivery_created_at'), ['created_at'], unique=False)
        batch_op.create_index('ix_delivery_due', ['status', 'next_attempt_at'], unique=False)
        batch_op.create_index(batch_op.f('ix_delivery_event_seq'), ['event_seq'], unique=False)
        batch_op.create_index(batch_op.f('ix_delivery_subscription_id'), ['subscription_id'], unique=False)

    op.create_table('delivery_attempt',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('delivery_id', sqlmodel.sql.sqltypes.AutoString(length=40), nullable=False),
    sa.Column('attempt', sa.Integer(), nullable=False),
    sa.Column('attempted_at', storage.types.UTCDateTime(timezone=True), nullable=False),
    sa.Column('status_code', sa.Integer(), nullable=True),
    sa.Column('error', sqlmodel.sql.sqltypes.AutoString(), nullable=True),
    sa.Column('duration_ms', sa.Integer(), nullable=False),
    sa.Column('outcome', sqlmodel.sql.sqltypes.AutoString(length=10), nullable=False),
    sa.ForeignKeyConstraint(['delivery_id'], ['delivery.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('delivery_attempt', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_delivery_attempt_delivery_id'), ['delivery_id'], unique=False)



def downgrade() -> None:
    with op.batch_alter_table('delivery_attempt', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_delivery_attempt_delivery_id'))

    op.drop_table('delivery_attempt')
    with op.batch_alter_table('delivery', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_delivery_subscription_id'))
        batch_op.drop_index(batch_op.f('ix_delivery_event_seq'))
        batch_op.drop_index('ix_delivery_due')
        batch_op.drop_index(batch_op.f('ix_delivery_created_at'))

    op.drop_table('delivery')
    op.drop_table('subscription')
