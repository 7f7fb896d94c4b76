"""Pickle weight files judged by what they import: the weights differ's words, severity and flag per verdict,
and tensor-level diffs of torch checkpoints from the manifest their pickle scan derived."""

from __future__ import annotations

import pytest

from tests.support.pickle_repos import calling_fragment, scanned, tensor_pickle, torch_zip
from tracker.differs import weights
from tracker.revision.changes import Severity
from tracker.revision.stored import pickle_manifest

PATH = "pytorch_model.bin"


def _with_pickle(kit, seed: str, data: bytes):
    snap = kit.build(lfs_files={PATH: kit.lfs(seed, len(data))})
    snap.scans[PATH] = scan = scanned(PATH, data)
    if (manifest := pickle_manifest(scan)) is not None:
        snap.manifests[PATH] = manifest
    return snap


@pytest.mark.parametrize(
    "data, severity, security, words",
    [
        (torch_zip(tensor_pickle()), Severity.NOTICE, False, "pickle format, imports only tensor rebuilds"),
        (torch_zip(tensor_pickle(calling_fragment("os", "system", "id"))), Severity.CRITICAL, True,
         "pickle imports a dangerous callable: os.system (archive/data.pkl, byte "),
        (torch_zip(tensor_pickle(calling_fragment("somepkg", "thing", "x"))), Severity.WARNING, True,
         "pickle imports a callable no rule knows: somepkg.thing (archive/data.pkl, byte "),
        (torch_zip(tensor_pickle())[:300], Severity.WARNING, True, "pickle format, could not be checked (not a zip"),
    ],
    ids=["safe", "dangerous", "unknown", "truncated"],
)
def test_an_added_pickle_is_judged_by_its_imports(kit, data, severity, security, words):
    """Safe imports are a notice; a dangerous one critical naming callable and place; unknown and unreadable warnings."""
    old = kit.build(lfs_files={})
    [change] = [c for c in weights.diff(old, _with_pickle(kit, "p", data)) if "status" in c.detail]
    assert words in change.summary, change.summary
    assert (change.severity, change.security) == (severity, security)
    assert change.detail["pickle_scan"]["verdict"] in ("safe", "dangerous", "unknown", "unreadable")


def test_a_changed_dangerous_pickle_names_where_the_callable_is():
    """The detail lists each dangerous callable's zip member, byte offset and opcode."""
    from tracker.differs.pickle_verdicts import pickle_verdict

    verdict = pickle_verdict(scanned(PATH, torch_zip(tensor_pickle(calling_fragment("os", "system", "id")))))
    [place] = verdict.detail["occurrences"]
    assert place["callable"] == "os.system" and place["member"] == "archive/data.pkl"
    assert place["offset"] > 0 and place["opcode"] == "GLOBAL"
    assert verdict.detail["callables"] == ["os.system"]


def test_torch_checkpoints_diff_at_tensor_level(kit):
    """A pickle-only checkpoint that gains a tensor says so from the manifests its scans derived."""
    old = _with_pickle(kit, "a", torch_zip(tensor_pickle(tensors=2)))
    new = _with_pickle(kit, "b", torch_zip(tensor_pickle(tensors=3), storages=3))
    changes = weights.diff(old, new)
    checkpoint = next(c for c in changes if "tensors added" in c.summary)
    assert "1 tensors added (layers.2.weight)" in checkpoint.summary and checkpoint.structural
    assert "parameters +32 (64 -> 96)" in checkpoint.summary


def test_training_args_bin_reads_as_training_arguments_at_notice(kit):
    """Trainer's training_args.bin added: a notice naming training arguments, not a security change."""
    from tests.support.torch_fixtures import FIXTURES, TRAINING_ARGS

    data = (FIXTURES / TRAINING_ARGS).read_bytes()
    old = kit.build(lfs_files={})
    new = kit.build(lfs_files={TRAINING_ARGS: kit.lfs("args", len(data))})
    new.scans[TRAINING_ARGS] = scanned(TRAINING_ARGS, data)
    [change] = [c for c in weights.diff(old, new) if c.path == TRAINING_ARGS and "status" in c.detail]
    assert "pickle format, training arguments (runs no code beyond constructing transformers classes)" in change.summary
    assert (change.severity, change.security) == (Severity.NOTICE, False)
