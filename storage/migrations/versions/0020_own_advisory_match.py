"""OSV queries match own records on their row alone: the record's `modified`, whether it is withdrawn and its
range's `last_affected` commit are copied into columns (back-filled here from the stored records), and one index
holds everything a query joins on, so a batch of a thousand revisions reads no record (issue 38).

Revision ID: 0020_own_match
Revises: 0019
Create Date: 2026-12-05 10:50:00.000000
"""

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = '0020_own_match'
down_revision = '0019'
branch_labels = None
depends_on = None

MATCH_COLUMNS = ['repo_id', 'sha', 'fixed_sha', 'last_affected_sha', 'withdrawn', 'modified', 'id']


def upgrade() -> None:
    with op.batch_alter_table('own_advisory') as batch:
        batch.add_column(sa.Column('modified', sqlmodel.sql.sqltypes.AutoString(length=40), nullable=False, server_default=''))
        batch.add_column(sa.Column('withdrawn', sa.Boolean(), nullable=False, server_default=sa.false()))
        batch.add_column(sa.Column('last_affected_sha', sqlmodel.sql.sqltypes.AutoString(length=40), nullable=True))
    _backfill()
    op.create_index('ix_own_advisory_match', 'own_advisory', MATCH_COLUMNS)


def _backfill() -> None:
    """Each stored record's values into its row (written out here, not imported: a migration stays as it was run)."""
    table = sa.table('own_advisory', sa.column('id', sa.String()), sa.column('record', sa.JSON()),
                     sa.column('modified', sa.String()), sa.column('withdrawn', sa.Boolean()),
                     sa.column('last_affected_sha', sa.String()))
    bind = op.get_bind()
    rows = bind.execute(sa.select(table.c.id, table.c.record)).all()
    for record_id, record in rows:
        record = record if isinstance(record, dict) else {}
        last = None
        for affected in record.get('affected') or ():
            for rng in (affected.get('ranges') or ()) if isinstance(affected, dict) else ():
                for event in (rng.get('events') or ()) if isinstance(rng, dict) else ():
                    if isinstance(event, dict) and 'last_affected' in event and last is None:
                        last = str(event['last_affected'])
        bind.execute(table.update().where(table.c.id == record_id).values(
            modified=str(record.get('modified') or ''), withdrawn=bool(record.get('withdrawn')), last_affected_sha=last))


def downgrade() -> None:
    op.drop_index('ix_own_advisory_match', table_name='own_advisory')
    with op.batch_alter_table('own_advisory') as batch:
        batch.drop_column('last_affected_sha')
        batch.drop_column('withdrawn')
        batch.drop_column('modified')
