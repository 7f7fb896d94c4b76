"""Detection: every malicious sample of the corpus (published bypass techniques, as bytes) is flagged."""

from __future__ import annotations

import pytest

from tests.support.pickle_corpus import Sample, corpus
from tracker.formats.pickle_files import scan_file
from tracker.formats.ranged import BytesSource

SAMPLES = corpus()


@pytest.mark.parametrize("sample", SAMPLES, ids=[f"{i:02d}-{s.technique[:48]}" for i, s in enumerate(SAMPLES)])
def test_every_malicious_sample_is_flagged(sample: Sample) -> None:
    """Dangerous (or unknown where no rule can name it), and the culprit named among the imports."""
    result, _, _ = scan_file(sample.path, BytesSource(sample.data))
    assert result["verdict"] in ("dangerous", "unknown")
    judged = {f"{i['module']}.{i['name']}": i["verdict"] for i in result["imports"]}
    if sample.culprit is not None:
        assert sample.culprit in judged
        if judged[sample.culprit] == "dangerous":
            assert result["verdict"] == "dangerous"


def test_named_dangerous_callables_give_a_dangerous_verdict() -> None:
    """Where a rule can know the callable (all but EXT codes, unresolved and unlisted names), the verdict is dangerous."""
    unknown_by_design = {"EXT1 registry code", "EXT2 registry code", "EXT4 registry code",
                         "STACK_GLOBAL whose module is a call's result",
                         "a class of the saving script (unknown: no rule can know it)"}  # fmt: skip
    for sample in SAMPLES:
        verdict = scan_file(sample.path, BytesSource(sample.data))[0]["verdict"]
        assert verdict == ("unknown" if sample.technique in unknown_by_design else "dangerous"), sample.technique


def test_occurrences_say_where_the_callable_is() -> None:
    """The dangerous callable's occurrence names the zip member and the byte offset of its GLOBAL."""
    sample = next(s for s in SAMPLES if s.technique == "payload inside a torch checkpoint's data.pkl")
    result, kept, _ = scan_file(sample.path, BytesSource(sample.data))
    (where,) = [o for o in result["occurrences"] if o["callable"] == "os.system"]
    assert where["member"] == "archive/data.pkl" and "called" in where["uses"]
    assert kept[where["offset"] : where["offset"] + 11] == b"cos\nsystem\n"
