"""The Hub pages each listing scope's last pass read, so the listing can choose per-author passes or one pass
over every model by what each cost last time (issue 27).

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-08 10:00:00.000000
"""

import sqlalchemy as sa
from alembic import op

revision = '0017'
down_revision = '0016'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('listing_state') as batch:
        batch.add_column(sa.Column('pages', sa.Integer(), nullable=False, server_default='0'))


def downgrade() -> None:
    with op.batch_alter_table('listing_state') as batch:
        batch.drop_column('pages')
