"""Scale: indexes for what feeds, the history page and ingest look up, and per-repo summaries kept on
write (back-filled here from the history of an existing database).

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-30 17:00:00.000000
"""

import sqlalchemy as sa
import sqlmodel
from alembic import op

import storage.types

revision = '0012'
down_revision = '0011'
branch_labels = None
depends_on = None

# Every repo with history, its counts and its newest revision by (committed_at, id); then the repos
# that have events but no revision. Written out here, not imported: a migration stays as it was run.
_BACKFILL = """
INSERT INTO repo_summary (repo_id, revisions, changes, events, latest_revision_id, latest_sha, last_committed_at, last_ingested_at)
SELECT r.repo_id, r.n, COALESCE(c.n, 0), COALESCE(e.n, 0), newest.id, newest.sha, newest.committed_at, r.last_ingested_at
FROM (SELECT repo_id, COUNT(*) AS n, MAX(ingested_at) AS last_ingested_at FROM revision GROUP BY repo_id) AS r
JOIN revision AS newest ON newest.id = (
    SELECT r2.id FROM revision AS r2 WHERE r2.repo_id = r.repo_id ORDER BY r2.committed_at DESC, r2.id DESC LIMIT 1)
LEFT JOIN (SELECT rv.repo_id, COUNT(*) AS n FROM change AS ch JOIN revision AS rv ON rv.id = ch.revision_id GROUP BY rv.repo_id) AS c
    ON c.repo_id = r.repo_id
LEFT JOIN (SELECT repo_id, COUNT(*) AS n FROM event GROUP BY repo_id) AS e ON e.repo_id = r.repo_id
UNION ALL
SELECT e.repo_id, 0, 0, COUNT(*), NULL, NULL, NULL, NULL
FROM event AS e WHERE NOT EXISTS (SELECT 1 FROM revision AS rv WHERE rv.repo_id = e.repo_id)
GROUP BY e.repo_id
"""


def upgrade() -> None:
    op.create_table('repo_summary',
    sa.Column('repo_id', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
    sa.Column('revisions', sa.Integer(), nullable=False),
    sa.Column('changes', sa.Integer(), nullable=False),
    sa.Column('events', sa.Integer(), nullable=False),
    sa.Column('latest_revision_id', sa.Integer(), nullable=True),
    sa.Column('latest_sha', sqlmodel.sql.sqltypes.AutoString(length=40), nullable=True),
    sa.Column('last_committed_at', storage.types.UTCDateTime(timezone=True), nullable=True),
    sa.Column('last_ingested_at', storage.types.UTCDateTime(timezone=True), nullable=True),
    sa.PrimaryKeyConstraint('repo_id')
    )
    op.create_index('ix_event_repo_seq', 'event', ['repo_id', 'seq'], unique=False)
    op.create_index('ix_event_security_seq', 'event', ['security', 'seq'], unique=False)
    op.create_index('ix_event_revision_id', 'event', ['revision_id'], unique=False)
    op.drop_index('ix_event_repo_id', table_name='event')  # the leading column of ix_event_repo_seq
    op.create_index('ix_revision_repo_committed', 'revision', ['repo_id', 'committed_at', 'id'], unique=False)
    op.drop_index('ix_revision_repo_id', table_name='revision')  # the leading column of ix_revision_repo_committed
    op.execute(_BACKFILL)


def downgrade() -> None:
    op.create_index('ix_revision_repo_id', 'revision', ['repo_id'], unique=False)
    op.drop_index('ix_revision_repo_committed', table_name='revision')
    op.create_index('ix_event_repo_id', 'event', ['repo_id'], unique=False)
    op.drop_index('ix_event_revision_id', table_name='event')
    op.drop_index('ix_event_security_seq', table_name='event')
    op.drop_index('ix_event_repo_seq', table_name='event')
    op.drop_table('repo_summary')
