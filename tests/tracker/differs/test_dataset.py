"""Dataset change events between two revisions built from real Parquet files and GLUE-shaped cards: each with its
event kind, severity and one line a user of the dataset understands."""

from __future__ import annotations

from storage.kinds import DATASET_EVENT_KINDS
from tests.support.dataset_cards import glue_card
from tests.support.parquet_files import GLUE_FEATURES, data_file, glue_files, glue_table, parquet_bytes
from tracker.differs.dataset import diff
from tracker.formats.dataset_card import read_card
from tracker.revision.changes import ChangeKind, Severity
from tracker.revision.dataset_summary import Conversion, summarize
from tracker.revision.snapshot import FileEntry

REPO = "nyu-mll/glue"
COUNTS = {"cola": {"train": 10, "validation": 4}, "mrpc": {"train": 6, "test": 3}}


def summary_of(files: dict[str, bytes], card: str | None, others: tuple[str, ...] = (), **kwargs) -> dict:
    pairs = [data_file(path, data) for path, data in files.items()]
    entries = [e for e, _ in pairs] + [FileEntry(p, "0" * 40, 10) for p in (*others, "README.md")]
    return summarize("glue", entries, {e.path: s for e, s in pairs}, read_card(card), **kwargs)


def glue(counts=COUNTS, card_counts=None, licence="other", files=None, **kwargs) -> dict:
    return summary_of(files if files is not None else glue_files(counts), glue_card(card_counts or counts, licence), **kwargs)


def events(changes) -> list[tuple[str, str]]:
    return [(c.detail["event"], c.severity.value) for c in changes]


def test_nothing_changed_is_no_change():
    """The same files and card: no change."""
    assert diff(glue(), glue(), REPO) == []


def test_rows_added_and_removed_per_config_and_split():
    """Counts before and after, per config and split, in the summary and the detail."""
    after = {"cola": {"train": 12, "validation": 4}, "mrpc": {"train": 5, "test": 3}}
    changes = diff(glue(), glue(after), REPO)
    assert events(changes) == [("dataset.rows_added", "notice"), ("dataset.rows_removed", "warning")]
    assert changes[0].summary == "config cola, split train: 2 rows added (10 -> 12)"
    assert changes[1].summary == "config mrpc, split train: 1 rows removed (6 -> 5)"
    assert changes[1].detail == {"event": "dataset.rows_removed", "config": "mrpc", "split": "train", "before": 6,
                                 "after": 5, "delta": -1}
    assert all(c.kind is ChangeKind.DATASET for c in changes)


def test_rows_removed_under_a_licence_requiring_the_latest_version():
    """The watch's flag makes removed rows an event of their own, critical, with the total."""
    after = {"cola": {"train": 7, "validation": 2}, "mrpc": {"train": 6, "test": 3}}
    changes = diff(glue(), glue(after), REPO, requires_latest=True)
    last = changes[-1]
    assert (last.detail["event"], last.severity) == ("dataset.rows_removed_latest_required", Severity.CRITICAL)
    assert last.summary.startswith("5 rows removed under a licence requiring the latest version (cola/train, cola/validation)")
    assert "dataset.rows_removed_latest_required" not in [e for e, _ in events(diff(glue(), glue(after), REPO))]


def _with_column(counts, config, split, column, values) -> dict[str, bytes]:
    files = glue_files(counts)
    rows = counts[config][split]
    table = glue_table(config, rows).append_column(column, [values(rows)])
    features = {**GLUE_FEATURES[config], column: {"dtype": "float32", "_type": "Value"}}
    files[f"{config}/{split}-00000-of-00001.parquet"] = parquet_bytes(table, features)
    return files


def test_a_column_added_to_one_split_only_warns_of_the_cast():
    """A split gaining a column its sibling lacks: warning, naming the split and the HF type."""
    files = _with_column(COUNTS, "cola", "validation", "score", lambda n: [0.5] * n)
    changes = diff(glue(), glue(files=files), REPO)
    assert events(changes) == [("dataset.columns_added", "warning")]
    assert changes[0].summary == ('config cola: column(s) added: score (Value("float32")) (not in every split: '
                                  "load_dataset casts every split to one schema)")
    assert changes[0].detail["columns"] == {"score": {"type": 'Value("float32")', "splits": ["validation"]}}


def test_columns_removed_and_retyped_in_hf_types():
    """A column dropped, and a ClassLabel whose names changed: HF feature types before and after."""
    files = glue_files(COUNTS)
    for split, rows in COUNTS["mrpc"].items():
        table = glue_table("mrpc", rows).drop_columns(["sentence2"])
        features = {k: v for k, v in GLUE_FEATURES["mrpc"].items() if k != "sentence2"}
        features["label"] = {"names": ["different", "same"], "_type": "ClassLabel"}
        files[f"mrpc/{split}-00000-of-00001.parquet"] = parquet_bytes(table, features)
    changes = diff(glue(), glue(files=files), REPO)
    assert events(changes) == [("dataset.columns_removed", "warning"), ("dataset.columns_retyped", "warning")]
    assert changes[0].summary == 'config mrpc: column(s) removed: sentence2 (Value("string"))'
    assert changes[1].summary == ("config mrpc: column(s) retyped: label ClassLabel(names=[not_equivalent, equivalent]) "
                                  "-> ClassLabel(names=[different, same])")


def test_a_config_removed_names_the_call_that_fails():
    """mrpc gone: critical, with load_dataset's call."""
    after = {"cola": COUNTS["cola"]}
    changes = diff(glue(), glue(after), REPO)
    assert events(changes) == [("dataset.config_removed", "critical")]
    assert changes[0].summary == 'config mrpc removed: load_dataset("nyu-mll/glue", "mrpc") now fails'


def test_a_config_renamed_is_one_change():
    """The same data under a new config name: renamed, the old call failing and the new one named."""
    files = {p.replace("mrpc/", "paraphrase/"): d for p, d in glue_files(COUNTS).items()}
    card = glue_card(COUNTS).replace("mrpc/", "paraphrase/").replace("config_name: mrpc\n  data_files",
                                                                       "config_name: paraphrase\n  data_files")
    changes = diff(glue(), summary_of(files, card), REPO)
    assert events(changes) == [("dataset.config_renamed", "critical")]
    assert changes[0].summary == ('config mrpc renamed to paraphrase: load_dataset("nyu-mll/glue", "mrpc") now fails, '
                                  'use load_dataset("nyu-mll/glue", "paraphrase")')


def test_splits_renamed_and_removed():
    """mrpc's test split renamed to eval_set (same rows and columns) and cola's validation removed."""
    after = {"cola": {"train": 10}, "mrpc": {"train": 6, "eval_set": 3}}
    changes = diff(glue(), glue(after), REPO)
    assert events(changes) == [("dataset.split_removed", "critical"), ("dataset.split_renamed", "critical")]
    assert changes[0].summary == ('config cola: split validation removed: load_dataset("nyu-mll/glue", "cola", '
                                  'split="validation") now fails')
    assert changes[1].summary.startswith("config mrpc: split test renamed to eval_set")


def test_licence_and_gate():
    """The card's licence and the Hub's gate, before and after."""
    changes = diff(glue(gated=False), glue(licence="mit", gated="manual"), REPO)
    assert events(changes) == [("dataset.licence_changed", "warning"), ("dataset.gating_changed", "warning")]
    assert [c.summary for c in changes] == ["licence changed: other -> mit", "gate changed: not gated -> gated (manual)"]


def test_a_loading_script_added_then_only_the_script_left():
    """A script beside the data: warning, security; then the data gone: critical, unloadable with datasets 4."""
    before, with_script = glue(), glue(others=("glue.py",))
    added = diff(before, with_script, REPO)
    assert events(added) == [("dataset.loading_script_added", "warning")] and added[0].security
    only = summary_of({}, glue_card(COUNTS), others=("glue.py",))
    changes = diff(with_script, only, REPO)
    assert events(changes)[0] == ("dataset.script_only", "critical")
    assert "load_dataset fails with datasets 4.0 and later" in changes[0].summary


def test_a_reupload_is_info_only():
    """Every shard rewritten (new content ids, another row group size) with the same rows and columns: one info change."""
    files = {p: parquet_bytes(glue_table(p.split("/")[0], COUNTS[p.split("/")[0]][p.split("/")[1].split("-")[0]]),
                              GLUE_FEATURES[p.split("/")[0]], row_group_size=2) for p in glue_files(COUNTS)}
    changes = diff(glue(), glue(files=files), REPO)
    assert events(changes) == [("dataset.reuploaded", "info")]
    assert changes[0].summary == ("4 data file(s) rewritten with the same columns and rows in cola/train, cola/validation, "
                                  "mrpc/train, mrpc/test: a re-upload")


def test_card_counts_disagreeing_with_the_footers():
    """A card that now declares other counts than the files hold."""
    changes = diff(glue(), glue(card_counts={**COUNTS, "cola": {"train": 11, "validation": 4}}), REPO)
    assert events(changes) == [("dataset.card_mismatch", "notice")]
    assert changes[0].summary == "the card's num_examples disagree with the files' rows: cola/train: card 11, files 10"


def test_an_unreadable_new_shard_is_said_and_its_split_not_compared():
    """A truncated shard: a per-file event with the reason; its split's rows unknown, so no rows change."""
    files = glue_files(COUNTS)
    files["cola/train-00000-of-00001.parquet"] = files["cola/train-00000-of-00001.parquet"][:-30]
    changes = diff(glue(), glue(files=files), REPO)
    assert events(changes) == [("dataset.file_unreadable", "notice")]
    assert changes[0].summary.startswith("cola/train-00000-of-00001.parquet: unreadable: not a Parquet file")


def test_the_first_revision_reports_only_what_breaks():
    """A baseline: no diff, but a script-only dataset is critical from the start."""
    assert diff(None, glue(), REPO) == []
    only = summary_of({}, glue_card(COUNTS), others=("glue.py",))
    assert events(diff(None, only, REPO)) == [("dataset.script_only", "critical")]


def _converted(rows: int, lagging: bool) -> Conversion:
    pairs = [data_file("cola/train/0000.parquet", parquet_bytes(glue_table("cola", rows), GLUE_FEATURES["cola"]))]
    return Conversion("c" * 40, [e for e, _ in pairs], {e.path: s for e, s in pairs}, "a" * 40, lagging)


def test_a_script_dataset_is_compared_by_its_conversion_unless_it_lags():
    """No data files at the head: the viewer's conversion stands for them when current; a lagging one is not compared."""
    card = glue_card({"cola": {"train": 10}})
    old = summary_of({}, card, others=("glue.py",), conversion=_converted(10, False))
    new = summary_of({}, card, others=("glue.py",), conversion=_converted(8, False))
    assert events(diff(old, new, REPO)) == [("dataset.rows_removed", "warning")]
    lagging = summary_of({}, card, others=("glue.py",), conversion=_converted(8, True))
    assert diff(old, lagging, REPO) == []


def test_every_event_the_differ_names_is_a_documented_kind():
    """The event kinds in this module's source are storage.kinds' dataset kinds, all of them."""
    import inspect
    import re

    from tracker.differs import dataset

    named = set(re.findall(r'"(dataset\.[a-z_]+)"', inspect.getsource(dataset)))
    assert named == set(DATASET_EVENT_KINDS)


def test_an_unread_card_declares_nothing():
    """A card the gate refused (or unreadable YAML): no licence change and no configs 'renamed' to the files' own
    layout; an unreadable card is its own verdict."""
    unread = {**glue(), "card": "unread", "licence": None}
    assert diff(glue(), unread, REPO) == []
    hostile = summary_of(glue_files(COUNTS), "---\na: &x [*x]\n---\n")
    changes = diff(glue(), hostile, REPO)
    assert events(changes) == [("dataset.file_unreadable", "notice")]
    assert changes[0].path == "README.md" and "nests deeper than 64" in changes[0].summary


def _card_change(metadata: list[dict], status: str = "changed"):
    from tracker.differs.files import card_summary
    from tracker.revision.changes import Change

    summary, severity, security = card_summary("README.md", status, metadata)
    return Change(ChangeKind.FILES, "README.md", summary, severity, {"status": status, "metadata": metadata}, False,
                  security)


LICENCE_KEY = {"key": "license", "old": "apache-2.0", "new": "mit", "topic": "license"}
GATED_KEY = {"key": "gated", "old": None, "new": "manual", "topic": "gating"}


def test_a_licence_change_is_said_once_by_the_dataset_change():
    """The card's change leaves the licence to dataset.licence_changed: its summary and key table drop it, its
    severity and security come from what is left (gating still a warning); the licence change itself is
    security-relevant as the card's was, and the own advisory's recogniser sees it."""
    from tracker.advisories.own import classify
    from tracker.differs.dataset import licence_said_once

    licence = diff(glue(licence="apache-2.0"), glue(licence="mit"), REPO)
    assert events(licence) == [("dataset.licence_changed", "warning")] and licence[0].security
    only = _card_change([LICENCE_KEY])
    assert only.summary == 'README.md changed: license "apache-2.0" -> "mit"' and only.severity is Severity.WARNING
    card, said = licence_said_once([only, *licence])
    assert said is licence[0]
    assert (card.summary, card.severity, card.security) == ("README.md changed", Severity.INFO, False)
    assert card.detail["metadata"] == [] and card.detail["licence_metadata"] == [LICENCE_KEY]
    assert card.detail["licence_said_by"] == "dataset.licence_changed"
    assert classify(said) == {"license-or-gating": ["README.md"]}
    card, _ = licence_said_once([_card_change([GATED_KEY, LICENCE_KEY]), *licence])
    assert (card.summary, card.severity, card.security) == ('README.md changed: gated (none) -> "manual"',
                                                            Severity.WARNING, True)


def test_without_the_dataset_change_the_card_says_the_licence():
    """No dataset.licence_changed (a card unread on one side, or a model's card): the card's change is untouched;
    a card change with no licence key, or a malformed detail, is left as it is."""
    from tracker.differs.dataset import licence_said_once

    card = _card_change([LICENCE_KEY])
    assert licence_said_once([card]) == [card]
    unread = diff(summary_of(glue_files(COUNTS), None) | {"card": "unread"}, glue(licence="mit"), REPO)
    assert not [c for c in unread if c.detail.get("event") == "dataset.licence_changed"]
    assert licence_said_once([card, *unread]) == [card, *unread]
    licence = diff(glue(licence="apache-2.0"), glue(licence="mit"), REPO)
    gated_only = _card_change([GATED_KEY])
    odd = _card_change([])
    odd.detail["metadata"] = "not a list"
    assert licence_said_once([gated_only, odd, *licence]) == [gated_only, odd, *licence]
