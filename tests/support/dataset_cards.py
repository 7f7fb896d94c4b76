"""Dataset cards for tests, in the shape of a real one: GLUE's card on the Hub (nyu-mll/glue: `dataset_info` per
config with ClassLabel names and split counts, `configs` with `data_files` per split as `CONFIG/SPLIT-*`),
cut to the configs the tests use and with the counts and licence as a test asks."""

from __future__ import annotations

FEATURES = {
    "ax": """  - name: premise
    dtype: string
  - name: hypothesis
    dtype: string
  - name: label
    dtype:
      class_label:
        names:
          '0': entailment
          '1': neutral
          '2': contradiction
  - name: idx
    dtype: int32
""",
    "cola": """  - name: sentence
    dtype: string
  - name: label
    dtype:
      class_label:
        names:
          '0': unacceptable
          '1': acceptable
  - name: idx
    dtype: int32
""",
    "mrpc": """  - name: sentence1
    dtype: string
  - name: sentence2
    dtype: string
  - name: label
    dtype:
      class_label:
        names:
          '0': not_equivalent
          '1': equivalent
  - name: idx
    dtype: int32
""",
}


def glue_card(counts: dict[str, dict[str, int]], licence: str = "other", extra: str = "") -> str:
    """A GLUE-shaped README.md: for each config of `counts` ({config: {split: num_examples}}) its dataset_info and
    its data_files (`config/split-*`); `extra` is more YAML before the closing `---`."""
    info = "".join(
        f"- config_name: {config}\n  features:\n{FEATURES[config]}  splits:\n"
        + "".join(f"  - name: {split}\n    num_bytes: {n * 57}\n    num_examples: {n}\n" for split, n in splits.items())
        for config, splits in counts.items())
    configs = "".join(
        f"- config_name: {config}\n  data_files:\n"
        + "".join(f"  - split: {split}\n    path: {config}/{split}-*\n" for split in splits)
        for config, splits in counts.items())
    return (f"---\nlanguage:\n- en\nlicense:\n- {licence}\npretty_name: GLUE (General Language Understanding "
            f"Evaluation benchmark)\ndataset_info:\n{info}configs:\n{configs}{extra}---\n\n# Dataset Card for GLUE\n")
