"""The files differ: other files by name only, and the model card's front matter (all-MiniLM-L6-v2's README)."""

from __future__ import annotations

import json

import pytest

from tracker.differs import files
from tracker.revision.changes import ChangeKind, Severity

README = "all-minilm-l6-v2/README.md"


def card(kit) -> str:
    return kit.bytes(README).decode()


def front(extra: str):
    """An edit that adds YAML lines at the end of the front matter."""
    return lambda text: text.replace(
        "\npipeline_tag: sentence-similarity\n", f"\npipeline_tag: sentence-similarity\n{extra}", 1
    )


CARD_EDITS = [
    # (id, edit, severity, security, summary)
    ("license", lambda t: t.replace("license: apache-2.0", "license: mit", 1), Severity.WARNING, True,
     'README.md changed: license "apache-2.0" -> "mit"'),
    ("license-other", lambda t: t.replace("license: apache-2.0", "license: other\nlicense_name: minilm-community", 1),
     Severity.WARNING, True,
     'README.md changed: license "apache-2.0" -> "other", license_name (none) -> "minilm-community"'),
    ("gated", front("gated: true\n"), Severity.WARNING, True, "README.md changed: gated (none) -> true"),
    ("gating-terms",
     front("extra_gated_prompt: Agree to share your contact information\nextra_gated_fields:\n  Company: text\n"),
     Severity.WARNING, True, "README.md changed: gating terms changed"),
    ("base-model", front("base_model: nreimers/MiniLM-L6-H384-uncased\n"), Severity.NOTICE, False,
     'README.md changed: base_model (none) -> "nreimers/MiniLM-L6-H384-uncased"'),
    ("tags-only", lambda t: t.replace("- transformers\n", "- transformers\n- onnx\n", 1), Severity.INFO, False,
     "README.md changed"),
    ("prose-only", lambda t: t + "\nA new paragraph.\n", Severity.INFO, False, "README.md changed"),
]


@pytest.mark.parametrize(
    "edit, severity, security, summary", [r[1:] for r in CARD_EDITS], ids=[r[0] for r in CARD_EDITS]
)
def test_model_card(kit, edit, severity, security, summary):
    """Front-matter license, gating and base_model changes are called out; other edits are info."""
    text = card(kit)
    [change] = files.diff(kit.build({"README.md": text}), kit.build({"README.md": edit(text)}))
    assert change.kind is ChangeKind.FILES and change.path == "README.md"
    assert change.summary == summary
    assert (change.severity, change.security, change.structural) == (severity, security, False)
    json.dumps(change.to_dict())


def test_metadata_detail(kit):
    """Every front-matter key that changed is in the detail, watched or not."""
    text = card(kit)
    new = text.replace("- transformers\n", "- transformers\n- onnx\n", 1).replace("license: apache-2.0", "license: mit")
    [change] = files.diff(kit.build({"README.md": text}), kit.build({"README.md": new}))
    by_key = {m["key"]: m for m in change.detail["metadata"]}
    assert by_key["license"] == {"key": "license", "old": "apache-2.0", "new": "mit", "topic": "license"}
    assert by_key["tags"]["topic"] is None and "onnx" in by_key["tags"]["new"]


def test_malformed_front_matter(kit):
    """Front matter that is not valid YAML is noted in the detail; the change is still reported."""
    text = card(kit)
    [change] = files.diff(
        kit.build({"README.md": text}), kit.build({"README.md": text.replace("license: apache-2.0", "license: [", 1)})
    )
    assert "not valid YAML" in change.detail["error"]


def test_model_card_unavailable(kit):
    """A README we could not download is reported changed by name, saying why."""
    old = kit.build({"README.md": card(kit)})
    new = kit.build(unavailable={"README.md": ("too large to download", b"x")})
    [change] = files.diff(old, new)
    assert (
        change.summary == "README.md changed" and change.detail["front_matter"] == "not compared: too large to download"
    )


@pytest.mark.parametrize(
    "text, meta, error",
    [
        ("---\nlicense: mit\ntags:\n- a\n---\n# Title\n", {"license": "mit", "tags": ["a"]}, None),
        ("\ufeff---\nlicense: mit\n---\n", {"license": "mit"}, None),
        ("# No front matter\nlicense: mit\n", {}, None),
        ("---\nlicense: mit\n", {}, "front matter has no closing ---"),
        ("---\n- a list\n---\n", {}, None),
        ("", {}, None),
    ],
    ids=["plain", "bom", "none", "unclosed", "not-a-mapping", "empty"],
)
def test_front_matter_reader(text, meta, error):
    """The front-matter reader takes only the leading --- block, as a mapping."""
    assert files.front_matter(text) == (meta, error)


def test_other_files_by_name(kit):
    """Other files are added, removed or changed by name only, at info."""
    old = kit.build(
        {".gitattributes": kit.bytes("all-minilm-l6-v2/README.md")[:100], "LICENSE": "MIT", "data_config.json": "[]"}
    )
    new = kit.build({".gitattributes": "*.safetensors filter=lfs\n", "NOTICE": "x", "data_config.json": "[]"})
    changes = files.diff(old, new)
    assert [(c.path, c.summary, c.severity) for c in changes] == [
        (".gitattributes", ".gitattributes changed", Severity.INFO),
        ("LICENSE", "LICENSE removed", Severity.INFO),
        ("NOTICE", "NOTICE added", Severity.INFO),
    ]
    assert changes[0].detail["old_content_id"] != changes[0].detail["new_content_id"]


def test_many_files_are_summed_up(kit):
    """A revision adding hundreds of files gets one Change with the count and a few names."""
    new = kit.build({f"images/{i:04d}.png": f"{i}" for i in range(300)})
    [change] = files.diff(kit.build({}), new)
    assert change.summary.startswith("300 files added (images/0000.png, images/0001.png, images/0002.png")
    assert change.detail["count"] == 300 and len(change.detail["paths"]) == 20


def test_file_deltas_by_content_and_size(kit):
    """file_deltas reports added, removed and changed files (content id or size), sorted by path."""
    old = kit.build({"a.txt": "1", "b.txt": "2"}, lfs_files={"w.safetensors": kit.lfs("x", 10)})
    new = kit.build({"b.txt": "3", "c.txt": "4"}, lfs_files={"w.safetensors": kit.lfs("x", 11)})
    deltas = files.file_deltas(old, new, lambda p: True)
    assert [(d.path, d.status) for d in deltas] == [
        ("a.txt", "removed"), ("b.txt", "changed"), ("c.txt", "added"), ("w.safetensors", "changed")
    ]


def test_first_revision_and_owned_kinds(kit):
    """No Change for the first revision; config, weights and code files are other differs'."""
    assert files.diff(None, kit.build({"README.md": "x"})) == []
    old = kit.build({"config.json": "{}", "modeling.py": "a"}, lfs_files={"model.safetensors": kit.lfs("a", 1)})
    new = kit.build({"config.json": "{ }", "modeling.py": "b"}, lfs_files={"model.safetensors": kit.lfs("b", 1)})
    assert files.diff(old, new) == []
