"""What a pin looks like, shared by every reader of pins in files (Python, shell and TOML text, YAML
deployment files): the `CodePin` and `CodeScan` records, what a repo id and a revision must look like to
be checked, and the flags, environment variables and keys that name a model and its revision.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from storage.kinds import is_branch_name, is_repo_key, short_dataset_name
from tracker.formats.local_files import quoted
from tracker.pins.cache import SHA_RE

HEX_RE = re.compile(r"^[0-9a-fA-F]{4,40}$")
_REPO_SHAPED = re.compile(r"[^/\s]+/+[^/\s]+")  # org/name, and typos of it such as org//name

# Command-line flags, as serving runtimes spell them: vLLM (`--model`, `--revision`, `--tokenizer`,
# `--tokenizer-revision`), SGLang (`--model-path`, `--tokenizer-path`), text-generation-inference and
# text-embeddings-inference (`--model-id`), KServe's huggingfaceserver (`--model_id`, `--model_revision`,
# `--tokenizer_revision`). Each group pairs a model flag with a revision flag of the same group only.
FLAG_GROUPS: tuple[tuple[frozenset[str], frozenset[str]], ...] = (
    (frozenset({"--model", "--model-id", "--model_id", "--model-name", "--model_name", "--model-path", "--model_path"}),
     frozenset({"--revision", "--model-revision", "--model_revision"})),
    (frozenset({"--tokenizer", "--tokenizer-path", "--tokenizer_path"}),
     frozenset({"--tokenizer-revision", "--tokenizer_revision"})),
)
# A model named by position: `vllm serve ORG/NAME`, `hf download ORG/NAME`, `huggingface-cli download ORG/NAME`.
POSITIONAL_COMMANDS = frozenset({("vllm", "serve"), ("hf", "download"), ("huggingface-cli", "download")})

# Environment variables that name a model and its revision, each pair as one runtime reads it:
# text-generation-inference and text-embeddings-inference (the launcher's `--model-id` / `--revision`
# from the environment), SageMaker's Hugging Face containers, RunPod's vLLM worker.
ENV_PAIRS: tuple[tuple[str, str], ...] = (
    ("MODEL_ID", "REVISION"),
    ("HF_MODEL_ID", "HF_MODEL_REVISION"),
    ("MODEL_NAME", "MODEL_REVISION"),
)

# Keys of one mapping (a Helm values file, an application's config) that name a model and its revision.
# The weak keys name other things too (`image.repository: vllm/vllm-openai`): a model only beside a revision.
MODEL_KEYS = ("model", "model_id", "modelId", "model_name", "modelName", "repo_id", "repoId", "model_name_or_path",
              "modelNameOrPath", "modelPath", "model_path")
WEAK_MODEL_KEYS = ("repository", "repo")
REVISION_KEYS = ("revision", "model_revision", "modelRevision")

# Keys of one mapping that name a dataset and its revision, as training and evaluation configs write them:
# lm-evaluation-harness tasks (`dataset_path: ORG/NAME`, `dataset_kwargs: {revision: SHA}`), TRL / open-r1 recipes
# (`dataset_name`, `dataset_revision`), and configs that say `dataset:` beside a revision. A dataset pin is the
# dataset's key, `datasets/ORG/NAME`: a model of the same name named in the same mapping is a pin of its own.
# `dataset_name` in lm-eval is the config ("main", "ARC-Challenge"), never repo-shaped: not read as a repo.
DATASET_KEYS = ("dataset_path", "dataset_name", "datasetName", "dataset_id", "datasetId", "dataset_repo",
                "dataset_repo_id", "datasetRepo")
WEAK_DATASET_KEYS = ("dataset",)  # names other things too (a local file, a registry name): only beside a revision
DATASET_REVISION_KEYS = ("dataset_revision", "datasetRevision")
DATASET_KWARGS_KEY = "dataset_kwargs"  # lm-eval: the keyword arguments of its load_dataset call, `revision` one
# Axolotl: `datasets:` (and `test_datasets:`, `pretraining_dataset:`) list mappings whose `path` is a Hub dataset
# and whose `revision` pins it.
DATASET_LIST_KEYS = ("datasets", "test_datasets", "pretraining_dataset")
DATASET_LIST_REVISION_KEYS = ("revision",)
# lm-eval's `dataset_path` may be a canonical short name (`wikitext`), a pin of `datasets/wikitext` beside a revision
# (as `load_dataset("wikitext", revision=...)` is), unless it names one of the `datasets` library's own builders.
SHORT_NAME_DATASET_KEYS = ("dataset_path",)


def looks_like_repo(value: str) -> bool:
    """Whether a string is meant as `org/name` (malformed ones included), not a local path or a bare name."""
    return _REPO_SHAPED.fullmatch(value) is not None and not value.startswith((".", "~", "$", "/")) \
        and "://" not in value and len(value) <= 300


def is_short_dataset_key(value: str) -> bool:
    """`datasets/wikitext`: a dataset pinned in code by its canonical short name (no org), which `outdated` resolves
    through the Hub to the org name it redirects to; never stored as a watch."""
    return value.startswith("datasets/") and short_dataset_name(value) is not None


@dataclass(frozen=True)
class CodePin:
    """A model a file names. `revision` is what it pins (None: unpinned); `sha` the 40-hex commit when that
    is what it pins, else `branch` the branch or tag it follows. `start`/`end`: the revision's characters
    in the file's text, for `--write`; `yaml_plain`: they are a whole plain (unquoted) YAML scalar, where a
    new sha YAML would read as a number must be written quoted."""

    path: str
    line: int
    repo_id: str
    revision: str | None = None
    sha: str | None = None
    branch: str | None = None
    start: int | None = None
    end: int | None = None
    yaml_plain: bool = False

    @property
    def location(self) -> str:
        return f"{self.path}:{self.line}"

    def to_dict(self) -> dict[str, object]:
        return {"path": self.path, "line": self.line, "repo_id": self.repo_id, "revision": self.revision,
                "sha": self.sha, "branch": self.branch}


@dataclass
class CodeScan:
    """What a tree pins: `pins` by sha, `branch_pins` following a branch or tag, `unpinned` uses, and
    `problems` (a location and what is wrong) and `skipped` files (a path and why)."""

    root: Path
    pins: list[CodePin] = field(default_factory=list)
    branch_pins: list[CodePin] = field(default_factory=list)
    unpinned: list[CodePin] = field(default_factory=list)
    problems: list[tuple[str, str]] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    files_read: int = 0

    def add(self, pin: CodePin) -> None:
        """File `pin` by what it pins, or as a problem naming what cannot be checked."""
        if not (is_repo_key(pin.repo_id) or is_short_dataset_key(pin.repo_id)):
            self.problems.append((pin.location, f"{quoted(pin.repo_id)} is not a Hub repo id (org/name)"))
        elif pin.revision is None:
            self.unpinned.append(pin)
        elif SHA_RE.match(pin.revision):
            self.pins.append(replace(pin, sha=pin.revision, branch=None))
        elif HEX_RE.match(pin.revision) and pin.revision.lower() == pin.revision and len(pin.revision) < 40:
            self._problem(pin, "is a short sha: pin the full 40-hex commit")
        elif HEX_RE.match(pin.revision) and len(pin.revision) == 40:
            self._problem(pin, "is an uppercase sha: the Hub's are lowercase")
        elif is_branch_name(pin.revision):
            self.branch_pins.append(replace(pin, sha=None, branch=pin.revision))
        else:
            self._problem(pin, "is neither a commit sha nor a branch name")

    def _problem(self, pin: CodePin, what: str) -> None:
        self.problems.append((pin.location, f"{pin.repo_id}: revision {quoted(pin.revision)} {what}"))


# `load_dataset("json", data_files=...)` and the like name one of the `datasets` library's own builders, not a Hub
# dataset: a name without an org is a Hub dataset's canonical short name (`wikitext`) only when it is none of these
# and the call pins a revision (a bare name without one may as well be a local folder).
PACKAGED_BUILDERS = frozenset({"json", "csv", "parquet", "text", "arrow", "pandas", "sql", "generator", "spark", "xml",
                               "imagefolder", "audiofolder", "videofolder", "pdffolder", "niftifolder", "webdataset",
                               "cache"})
