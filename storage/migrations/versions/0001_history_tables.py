"""History tables: watches, revisions, blobs, file lists, weight manifests, changes, events.

Revision ID: 0001
Revises:
Create Date: 2026-11-29 15:33:16.671865
"""

import sqlalchemy as sa
import sqlmodel
from alembic import op

import storage.types

revision = '0001'
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('blob',
    sa.Column('oid', sqlmodel.sql.sqltypes.AutoString(length=40), nullable=False),
    sa.Column('size', sa.BigInteger(), nullable=False),
    sa.Column('encoding', sqlmodel.sql.sqltypes.AutoString(length=10), nullable=False),
    sa.Column('data', sa.LargeBinary(), nullable=False),
    sa.PrimaryKeyConstraint('oid')
    )
    op.create_table('revision',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('repo_id', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
    sa.Column('sha', sqlmodel.sql.sqltypes.AutoString(length=40), nullable=False),
    sa.Column('parent_sha', sqlmodel.sql.sqltypes.AutoString(length=40), nullable=True),
    sa.Column('branch', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
    sa.Column('committed_at', storage.types.UTCDateTime(timezone=True), nullable=False),
    sa.Column('title', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
    sa.Column('message', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
    sa.Column('authors', sa.JSON(), nullable=False),
    sa.Column('ingested_at', storage.types.UTCDateTime(timezone=True), nullable=False),
    sa.Column('is_baseline', sa.Boolean(), nullable=False),
    sa.Column('file_count', sa.Integer(), nullable=False),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('repo_id', 'sha', name='uq_revision_repo_sha')
    )
    with op.batch_alter_table('revision', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_revision_repo_id'), ['repo_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_revision_sha'), ['sha'], unique=False)

    op.create_table('watch',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('repo_id', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
    sa.Column('branch', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
    sa.Column('interval_s', sa.Integer(), nullable=False),
    sa.Column('source', sqlmodel.sql.sqltypes.AutoString(length=20), nullable=False),
    sa.Column('backfill', sa.Integer(), nullable=False),
    sa.Column('created_at', storage.types.UTCDateTime(timezone=True), nullable=False),
    sa.Column('last_sha', sqlmodel.sql.sqltypes.AutoString(length=40), nullable=True),
    sa.Column('repo_meta', sa.JSON(), nullable=True),
    sa.Column('last_polled_at', storage.types.UTCDateTime(timezone=True), nullable=True),
    sa.Column('last_ok_at', storage.types.UTCDateTime(timezone=True), nullable=True),
    sa.Column('last_error', sqlmodel.sql.sqltypes.AutoString(), nullable=True),
    sa.Column('error_count', sa.Integer(), nullable=False),
    sa.Column('next_retry_at', storage.types.UTCDateTime(timezone=True), nullable=True),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('repo_id', 'branch', name='uq_watch_repo_branch')
    )
    with op.batch_alter_table('watch', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_watch_repo_id'), ['repo_id'], unique=False)

    op.create_table('weight_file',
    sa.Column('sha256', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
    sa.Column('tensor_count', sa.Integer(), nullable=False),
    sa.Column('parameters', sa.BigInteger(), nullable=False),
    sa.Column('file_metadata', sa.JSON(), nullable=True),
    sa.Column('error', sqlmodel.sql.sqltypes.AutoString(), nullable=True),
    sa.Column('read_at', storage.types.UTCDateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('sha256')
    )
    op.create_table('change',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('revision_id', sa.Integer(), nullable=False),
    sa.Column('ordinal', sa.Integer(), nullable=False),
    sa.Column('kind', sqlmodel.sql.sqltypes.AutoString(length=20), nullable=False),
    sa.Column('path', sqlmodel.sql.sqltypes.AutoString(length=1000), nullable=False),
    sa.Column('summary', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
    sa.Column('severity', sqlmodel.sql.sqltypes.AutoString(length=10), nullable=False),
    sa.Column('structural', sa.Boolean(), nullable=False),
    sa.Column('security', sa.Boolean(), nullable=False),
    sa.Column('detail', sa.JSON(), nullable=False),
    sa.ForeignKeyConstraint(['revision_id'], ['revision.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('change', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_change_kind'), ['kind'], unique=False)
        batch_op.create_index(batch_op.f('ix_change_revision_id'), ['revision_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_change_security'), ['security'], unique=False)

    op.create_table('event',
    sa.Column('seq', sa.Integer(), nullable=False),
    sa.Column('event_id', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
    sa.Column('kind', sqlmodel.sql.sqltypes.AutoString(length=40), nullable=False),
    sa.Column('repo_id', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
    sa.Column('revision_id', sa.Integer(), nullable=True),
    sa.Column('sha', sqlmodel.sql.sqltypes.AutoString(length=40), nullable=True),
    sa.Column('title', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
    sa.Column('severity', sqlmodel.sql.sqltypes.AutoString(length=10), nullable=False),
    sa.Column('security', sa.Boolean(), nullable=False),
    sa.Column('created_at', storage.types.UTCDateTime(timezone=True), nullable=False),
    sa.Column('payload', sa.JSON(), nullable=False),
    sa.ForeignKeyConstraint(['revision_id'], ['revision.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('seq'),
    sa.UniqueConstraint('event_id')
    )
    with op.batch_alter_table('event', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_event_created_at'), ['created_at'], unique=False)
        batch_op.create_index(batch_op.f('ix_event_kind'), ['kind'], unique=False)
        batch_op.create_index(batch_op.f('ix_event_repo_id'), ['repo_id'], unique=False)

    op.create_table('revision_file',
    sa.Column('revision_id', sa.Integer(), nullable=False),
    sa.Column('path', sqlmodel.sql.sqltypes.AutoString(length=1000), nullable=False),
    sa.Column('oid', sqlmodel.sql.sqltypes.AutoString(length=40), nullable=False),
    sa.Column('size', sa.BigInteger(), nullable=False),
    sa.Column('lfs_sha256', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=True),
    sa.Column('lfs_size', sa.BigInteger(), nullable=True),
    sa.Column('kind', sqlmodel.sql.sqltypes.AutoString(length=20), nullable=False),
    sa.Column('held', sa.Boolean(), nullable=False),
    sa.Column('note', sqlmodel.sql.sqltypes.AutoString(), nullable=True),
    sa.ForeignKeyConstraint(['revision_id'], ['revision.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('revision_id', 'path')
    )
    with op.batch_alter_table('revision_file', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_revision_file_kind'), ['kind'], unique=False)
        batch_op.create_index(batch_op.f('ix_revision_file_lfs_sha256'), ['lfs_sha256'], unique=False)

    op.create_table('weight_tensor',
    sa.Column('weight_sha256', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
    sa.Column('name', sqlmodel.sql.sqltypes.AutoString(length=500), nullable=False),
    sa.Column('dtype', sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
    sa.Column('shape', sa.JSON(), nullable=False),
    sa.Column('parameters', sa.BigInteger(), nullable=False),
    sa.ForeignKeyConstraint(['weight_sha256'], ['weight_file.sha256'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('weight_sha256', 'name')
    )


def downgrade() -> None:
    op.drop_table('weight_tensor')
    with op.batch_alter_table('revision_file', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_revision_file_lfs_sha256'))
        batch_op.drop_index(batch_op.f('ix_revision_file_kind'))

    op.drop_table('revision_file')
    with op.batch_alter_table('event', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_event_repo_id'))
        batch_op.drop_index(batch_op.f('ix_event_kind'))
        batch_op.drop_index(batch_op.f('ix_event_created_at'))

    op.drop_table('event')
    with op.batch_alter_table('change', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_change_security'))
        batch_op.drop_index(batch_op.f('ix_change_revision_id'))
        batch_op.drop_index(batch_op.f('ix_change_kind'))

    op.drop_table('change')
    op.drop_table('weight_file')
    with op.batch_alter_table('watch', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_watch_repo_id'))

    op.drop_table('watch')
    with op.batch_alter_table('revision', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_revision_sha'))
        batch_op.drop_index(batch_op.f('ix_revision_repo_id'))

    op.drop_table('revision')
    op.drop_table('blob')
