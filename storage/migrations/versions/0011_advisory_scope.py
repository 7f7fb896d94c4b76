"""Advisory scope and substance: whether a linked advisory concerns the revision's model (with the
reason), and the digest of what a re-announcement is about per repo and advisory.

Revision ID: 0011
Revises: 0004
Create Date: 2026-12-03 10:00:00.000000
"""

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = '0011'
down_revision = '0004'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('advisory_link', schema=None) as batch_op:
        batch_op.add_column(sa.Column('relevant', sa.Boolean(), server_default=sa.true(), nullable=False))
        batch_op.add_column(sa.Column('relevance', sqlmodel.sql.sqltypes.AutoString(), nullable=True))
    with op.batch_alter_table('advisory_state', schema=None) as batch_op:
        batch_op.add_column(sa.Column('substance', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('advisory_state', schema=None) as batch_op:
        batch_op.drop_column('substance')
    with op.batch_alter_table('advisory_link', schema=None) as batch_op:
        batch_op.drop_column('relevance')
        batch_op.drop_column('relevant')
