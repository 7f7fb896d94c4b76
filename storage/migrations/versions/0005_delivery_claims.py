"""Delivery claims and the full attempt log: endpoints claimed by one dispatcher worker at a time (with a
heartbeat-renewed lease), attempts logged as started before their request and by which worker, the
retry window's start and the schedule's steps used per delivery.

Revision ID: 0005
Revises: 0003
Create Date: 2026-12-01 10:00:00.000000
"""

import sqlalchemy as sa
import sqlmodel
from alembic import op

import storage.types

revision = '0005'
down_revision = '0003'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('subscription', schema=None) as batch_op:
        batch_op.add_column(sa.Column('claimed_by', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=True))
        batch_op.add_column(sa.Column('claimed_until', storage.types.UTCDateTime(timezone=True), nullable=True))

    with op.batch_alter_table('delivery', schema=None) as batch_op:
        batch_op.add_column(sa.Column('first_attempt_at', storage.types.UTCDateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column('retry_step', sa.Integer(), server_default='0', nullable=False))

    with op.batch_alter_table('delivery_attempt', schema=None) as batch_op:
        batch_op.add_column(sa.Column('worker_id', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=True))
        batch_op.alter_column('outcome', existing_type=sqlmodel.sql.sqltypes.AutoString(length=10),
                              type_=sqlmodel.sql.sqltypes.AutoString(length=12), existing_nullable=False)

    # Deliveries tried before this version: their retry window starts at their first logged attempt.
    op.execute(
        "UPDATE delivery SET first_attempt_at = (SELECT MIN(attempted_at) FROM delivery_attempt"
        " WHERE delivery_attempt.delivery_id = delivery.id) WHERE attempts > 0"
    )


def downgrade() -> None:
    with op.batch_alter_table('delivery_attempt', schema=None) as batch_op:
        batch_op.alter_column('outcome', existing_type=sqlmodel.sql.sqltypes.AutoString(length=12),
                              type_=sqlmodel.sql.sqltypes.AutoString(length=10), existing_nullable=False)
        batch_op.drop_column('worker_id')

    with op.batch_alter_table('delivery', schema=None) as batch_op:
        batch_op.drop_column('retry_step')
        batch_op.drop_column('first_attempt_at')

    with op.batch_alter_table('subscription', schema=None) as batch_op:
        batch_op.drop_column('claimed_until')
        batch_op.drop_column('claimed_by')
