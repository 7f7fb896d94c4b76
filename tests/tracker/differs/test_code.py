"""The custom-code differ on phi-2's real configuration_phi.py and a real requirements.txt."""

from __future__ import annotations

import json

import pytest

from tracker.differs import code
from tracker.revision.changes import ChangeKind, Severity

PHI_CODE = "phi-2/configuration_phi.py"
PHI_CONFIG = "phi-2/config.phi-auto-map.json"
REQUIREMENTS = "requirements/requirements.txt"


def phi_source(kit) -> str:
    return kit.bytes(PHI_CODE).decode()


def inject_subprocess(text: str) -> str:
    return text.replace("import logging\n", "import logging\nimport subprocess\n", 1).replace(
        "        self.qk_layernorm = qk_layernorm\n",
        "        self.qk_layernorm = qk_layernorm\n        subprocess.run(['sh', '-c', kwargs.get('hook', 'true')])\n",
    )


PY_CASES = [
    # (id, old text or None, new text or None, summary)
    ("added", None, lambda t: t, "configuration_phi.py added (195 lines); named by auto_map"),
    ("removed", lambda t: t, None, "configuration_phi.py removed (195 lines); named by auto_map"),
    ("default-changed", lambda t: t, lambda t: t.replace("partial_rotary_factor=0.5", "partial_rotary_factor=0.4"),
     "configuration_phi.py changed (+1 -1 lines); named by auto_map"),
    ("subprocess-injected", lambda t: t, inject_subprocess,
     "configuration_phi.py changed (+2 -0 lines); named by auto_map; adds subprocess"),
]


@pytest.mark.parametrize("old, new, summary", [r[1:] for r in PY_CASES], ids=[r[0] for r in PY_CASES])
def test_python_files(kit, old, new, summary):
    """Every .py added, removed or changed is critical and security-relevant, with a unified diff."""
    config = {"config.json": kit.bytes(PHI_CONFIG)}
    text = phi_source(kit)
    old_snap = kit.build({**config, **({"configuration_phi.py": old(text)} if old else {})})
    new_snap = kit.build({**config, **({"configuration_phi.py": new(text)} if new else {})})
    [change] = code.diff(old_snap, new_snap)
    assert change.kind is ChangeKind.CUSTOM_CODE and change.summary == summary
    assert (change.severity, change.security) == (Severity.CRITICAL, True)
    assert change.detail["loaded_by_auto_map"] is True
    assert change.detail["diff"].startswith("--- a/configuration_phi.py\n+++ b/configuration_phi.py")
    json.dumps(change.to_dict())


def test_notable_lines_are_listed(kit):
    """Added lines that reach outside the process are listed for a reviewer."""
    text = phi_source(kit)
    [change] = code.diff(
        kit.build({"configuration_phi.py": text}), kit.build({"configuration_phi.py": inject_subprocess(text)})
    )
    assert change.detail["notable"] == ["import subprocess", "subprocess.run(['sh', '-c', kwargs.get('hook', 'true')])"]
    assert "+import subprocess" in change.detail["diff"]


def test_file_not_named_by_auto_map(kit):
    """A .py that no auto_map names is still critical; the detail says it is not loaded by auto_map."""
    [change] = code.diff(kit.build({}), kit.build({"scripts/convert.py": "print('hi')\n"}))
    assert change.summary == "scripts/convert.py added (1 line)"
    assert change.detail["loaded_by_auto_map"] is False and change.severity is Severity.CRITICAL


def test_huge_diff_is_truncated_with_counts(kit):
    """A 5,000-line rewrite keeps the full counts but only the first lines of the diff."""
    old = "\n".join(f"x_{i} = {i}" for i in range(5000)) + "\n"
    new = "\n".join(f"x_{i} = {i + 1}" for i in range(5000)) + "\n"
    [change] = code.diff(kit.build({"modeling_big.py": old}), kit.build({"modeling_big.py": new}))
    assert change.detail["truncated"] is True
    assert (change.detail["lines_added"], change.detail["lines_removed"]) == (5000, 5000)
    assert len(change.detail["diff"].splitlines()) <= code.MAX_DIFF_LINES
    assert len(change.detail["diff"]) <= code.MAX_DIFF_CHARS


def test_unavailable_python_file(kit):
    """A .py we could not download is compared by content id and says why."""
    old = kit.build({"modeling_x.py": "a = 1\n"})
    new = kit.build(unavailable={"modeling_x.py": ("404 from the Hub", b"a = 2\n")})
    [change] = code.diff(old, new)
    assert change.detail["not_compared"] == "404 from the Hub"
    assert change.severity is Severity.CRITICAL and change.security


def edit_requirements(text: str) -> str:
    text = text.replace("torch==2.4.0", "torch==2.5.1").replace("tqdm==4.66.4\n", "")
    return (
        "--extra-index-url https://download.pytorch.org/whl/cu121\n"
        + text
        + "flash-attn==2.6.3  # built against torch 2.5\n"
        + "git+https://github.com/example/kernels@main#egg=kernels\n"
    )


REQUIREMENT_CASES = [
    ("pins-and-sources", lambda t: t, edit_requirements,
     ["requirements.txt (new package source): torch==2.4.0 -> torch==2.5.1",
      "+--extra-index-url https://download.pytorch.org/whl/cu121", "+flash-attn==2.6.3", "-tqdm==4.66.4"]),
    ("comments-only", lambda t: t, lambda t: "# pinned for the demo\n\n" + t.replace("\n", "  # ok\n", 1),
     ["requirements.txt: reformatted, no requirement changed"]),
    ("added", None, lambda t: t, ["requirements.txt added: +certifi==2024.7.4", "+23 more"]),
]


@pytest.mark.parametrize(
    "old, new, fragments", [r[1:] for r in REQUIREMENT_CASES], ids=[r[0] for r in REQUIREMENT_CASES]
)
def test_requirements(kit, old, new, fragments):
    """requirements.txt changes are parsed lines (URLs and options kept as text): warning, security."""
    text = kit.bytes(REQUIREMENTS).decode()
    old_snap = kit.build({"requirements.txt": old(text)} if old else {})
    new_snap = kit.build({"requirements.txt": new(text)} if new else {})
    [change] = code.diff(old_snap, new_snap)
    for fragment in fragments:
        assert fragment in change.summary
    assert (change.severity, change.security) == (Severity.WARNING, True)


def test_requirements_detail(kit):
    """The detail separates re-pinned packages, added and removed lines, and new package sources."""
    text = kit.bytes(REQUIREMENTS).decode()
    [change] = code.diff(
        kit.build({"requirements.txt": text}), kit.build({"requirements.txt": edit_requirements(text)})
    )
    assert change.detail["changed"] == [{"name": "torch", "old": "torch==2.4.0", "new": "torch==2.5.1"}]
    assert change.detail["removed"] == ["tqdm==4.66.4"]
    assert change.detail["new_sources"] == [
        "--extra-index-url https://download.pytorch.org/whl/cu121",
        "git+https://github.com/example/kernels@main#egg=kernels",
    ]


def test_requirement_lines_parser():
    """Comments, blank lines and continuations go; `#egg=` fragments in URLs stay."""
    text = "a==1 \\\n  --hash=sha256:abc\n# note\n\nb>=2  # why\ngit+https://x/y.git#egg=y\n"
    assert code.requirement_lines(text) == ["a==1 --hash=sha256:abc", "b>=2", "git+https://x/y.git#egg=y"]


def test_first_revision_and_other_kinds(kit):
    """No Change for the first revision; files of other kinds are not the code differ's."""
    snap = kit.build({"modeling.py": "x = 1\n"})
    assert code.diff(None, snap) == []
    assert code.diff(kit.build({"README.md": "a"}), kit.build({"README.md": "b"})) == []
