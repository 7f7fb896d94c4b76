"""Advisories: dependency facts per revision, the OSV record cache, revision <-> advisory links,
hubwatch's own OSV records, re-check state, and revisions waiting for OSV.

Revision ID: 0004
Revises: 0002
Create Date: 2026-11-29 16:02:56.857312
"""

import sqlalchemy as sa
import sqlmodel
from alembic import op

import storage.types

revision = '0004'
down_revision = '0002'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('advisory_recheck',
    sa.Column('repo_id', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
    sa.Column('revision_id', sa.Integer(), nullable=True),
    sa.Column('checked_at', storage.types.UTCDateTime(timezone=True), nullable=False),
    sa.Column('error', sqlmodel.sql.sqltypes.AutoString(), nullable=True),
    sa.PrimaryKeyConstraint('repo_id')
    )
    op.create_table('advisory_state',
    sa.Column('repo_id', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
    sa.Column('advisory_key', sqlmodel.sql.sqltypes.AutoString(length=100), nullable=False),
    sa.Column('modified', sqlmodel.sql.sqltypes.AutoString(length=40), nullable=False),
    sa.Column('first_seen_at', storage.types.UTCDateTime(timezone=True), nullable=False),
    sa.Column('last_seen_at', storage.types.UTCDateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('repo_id', 'advisory_key')
    )
    op.create_table('osv_record',
    sa.Column('id', sqlmodel.sql.sqltypes.AutoString(length=100), nullable=False),
    sa.Column('modified', sqlmodel.sql.sqltypes.AutoString(length=40), nullable=False),
    sa.Column('aliases', sa.JSON(), nullable=False),
    sa.Column('record', sa.JSON(), nullable=False),
    sa.Column('withdrawn', sa.Boolean(), nullable=False),
    sa.Column('fetched_at', storage.types.UTCDateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_table('advisory_facts',
    sa.Column('revision_id', sa.Integer(), nullable=False),
    sa.Column('facts_oid', sqlmodel.sql.sqltypes.AutoString(length=40), nullable=False),
    sa.Column('advice_oid', sqlmodel.sql.sqltypes.AutoString(length=40), nullable=True),
    sa.Column('fact_changes', sa.JSON(), nullable=False),
    sa.Column('checked_at', storage.types.UTCDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['revision_id'], ['revision.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('revision_id')
    )
    op.create_table('advisory_link',
    sa.Column('revision_id', sa.Integer(), nullable=False),
    sa.Column('advisory_key', sqlmodel.sql.sqltypes.AutoString(length=100), nullable=False),
    sa.Column('package', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
    sa.Column('version', sqlmodel.sql.sqltypes.AutoString(length=100), nullable=False),
    sa.Column('status', sqlmodel.sql.sqltypes.AutoString(length=20), nullable=False),
    sa.Column('reason', sqlmodel.sql.sqltypes.AutoString(), nullable=True),
    sa.Column('verdict', sqlmodel.sql.sqltypes.AutoString(length=20), nullable=False),
    sa.Column('rule', sqlmodel.sql.sqltypes.AutoString(length=60), nullable=True),
    sa.Column('ids', sa.JSON(), nullable=False),
    sa.Column('modified', sqlmodel.sql.sqltypes.AutoString(length=40), nullable=False),
    sa.Column('summary', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
    sa.Column('checked_at', storage.types.UTCDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['revision_id'], ['revision.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('revision_id', 'advisory_key', 'package')
    )
    with op.batch_alter_table('advisory_link', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_advisory_link_advisory_key'), ['advisory_key'], unique=False)

    op.create_table('advisory_pending',
    sa.Column('revision_id', sa.Integer(), nullable=False),
    sa.Column('reason', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
    sa.Column('marked_at', storage.types.UTCDateTime(timezone=True), nullable=False),
    sa.Column('attempts', sa.Integer(), nullable=False),
    sa.Column('last_attempt_at', storage.types.UTCDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['revision_id'], ['revision.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('revision_id')
    )
    op.create_table('own_advisory',
    sa.Column('id', sqlmodel.sql.sqltypes.AutoString(length=60), nullable=False),
    sa.Column('repo_id', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
    sa.Column('revision_id', sa.Integer(), nullable=False),
    sa.Column('sha', sqlmodel.sql.sqltypes.AutoString(length=40), nullable=False),
    sa.Column('class_id', sqlmodel.sql.sqltypes.AutoString(length=40), nullable=False),
    sa.Column('severity', sqlmodel.sql.sqltypes.AutoString(length=20), nullable=False),
    sa.Column('record', sa.JSON(), nullable=False),
    sa.Column('published_at', storage.types.UTCDateTime(timezone=True), nullable=False),
    sa.Column('modified_at', storage.types.UTCDateTime(timezone=True), nullable=False),
    sa.Column('fixed_sha', sqlmodel.sql.sqltypes.AutoString(length=40), nullable=True),
    sa.ForeignKeyConstraint(['revision_id'], ['revision.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('own_advisory', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_own_advisory_repo_id'), ['repo_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_own_advisory_revision_id'), ['revision_id'], unique=False)



def downgrade() -> None:
    with op.batch_alter_table('own_advisory', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_own_advisory_revision_id'))
        batch_op.drop_index(batch_op.f('ix_own_advisory_repo_id'))

    op.drop_table('own_advisory')
    op.drop_table('advisory_pending')
    with op.batch_alter_table('advisory_link', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_advisory_link_advisory_key'))

    op.drop_table('advisory_link')
    op.drop_table('advisory_facts')
    op.drop_table('osv_record')
    op.drop_table('advisory_state')
    op.drop_table('advisory_recheck')
