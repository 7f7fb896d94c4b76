"""hubwatch's shared vocabulary: the values its columns hold, imported by every package.

Severities, change and event kinds, webhook formats, the repo-id and branch patterns are written here once;
tracker's enums (`tracker.revision.changes`) and feeds' request parameters are built on these values, and a
test checks that they agree.
"""

from __future__ import annotations

import re

# How loudly a change is announced, in increasing order.
SEVERITIES = ("info", "notice", "warning", "critical")
SEVERITY_RANK = {name: rank for rank, name in enumerate(SEVERITIES)}
SEVERITY_DESCRIPTIONS = {
    "info": "Recorded for the history; nothing changes for a user of the model (a baseline, a file list, a moved template).",
    "notice": "Worth knowing: a change that may alter results but rarely breaks them (added tokens, config values, an estimate).",
    "warning": "Likely to change behaviour: the chat template, the tokenizer, custom code or the weights changed.",
    "critical": "Act now: a security-relevant change (new pickle code, custom code run at load) or a broken generation "
                "(stop tokens dropped).",
}

# What a Change is about (DESIGN.md's table, repo-level facts, the estimate).
CHANGE_KINDS = ("config", "tokenizer", "chat_template", "weights", "custom_code", "files", "repo", "estimate",
                "stop_tokens", "lint", "dataset")
CHANGE_KIND_DESCRIPTIONS = {
    "config": "config.json, generation_config.json, processor and sentence-transformers configs: parsed JSON compared key by key.",
    "tokenizer": "tokenizer_config.json (without the chat template), special tokens, added tokens and tokenizer.json: "
                 "vocabulary, merges, normalizer and the tokenizer's behaviour on the bundled corpus.",
    "chat_template": "The chat template, wherever it lives: a text diff per named template and the rendered prompt of sample "
                     "conversations before and after.",
    "weights": "Weight files added, removed or changed (by LFS sha256 and size), tensor shapes and dtypes from safetensors "
               "and GGUF headers, and pickle formats.",
    "custom_code": "Python files named by auto_map, and requirements.txt: always security-relevant.",
    "files": "Any other file, added, removed or changed, by name only.",
    "repo": "Facts about the repo rather than a file: a history rewrite (force-push) or squash, the repo made private or "
            "gated, the files a gated repo refused to be read.",
    "estimate": "The estimator's parameters and memory per card changed (rerun when the structure changed).",
    "stop_tokens": "The set of token ids generation stops on, and the chat template's end of turn.",
    "lint": "A finding of the structure verifier (`hubwatch verify`) that appeared or was resolved: the config, weights "
            "and tokenizer checked against each other, rerun when any of them changes.",
    "dataset": "A dataset's configs, splits, rows and columns (read from Parquet footers, JSON Lines and CSV first "
               "ranges and the card's YAML), its licence, gate and loading script: each change also an event of its "
               "own `dataset.*` kind.",
}

# What an Event announces: the RSS category, the webhook `type`, the API filter.
REVISION_INGESTED = "revision.ingested"
ESTIMATE_CHANGED = "estimate.changed"
COST_CHANGED = "estimate.cost_changed"  # a card's training or serving cost moved past [cost] change_threshold
ADVISORY_PUBLISHED = "advisory.published"
REPO_VISIBILITY_CHANGED = "repo.visibility_changed"
DERIVATIVES_REACHED = "derivatives.reached"  # a base change, and how many of its derivatives carry it
DERIVATIVE_CAUGHT_UP = "derivative.caught_up"  # a derivative re-uploaded with a base change it lacked
REPO_GONE = "repo.gone"  # what the Hub did to the repo itself: one event per change of its state (REPO_STATES)
REPO_DISABLED = "repo.disabled"
REPO_GATED = "repo.gated"
REPO_BRANCH_MISSING = "repo.branch_missing"
REPO_RESTORED = "repo.restored"
REPO_MOVED = "repo.moved"
REPO_HISTORY_SQUASHED = "repo.history_squashed"  # the branch's history squashed to one commit: the old shas gone
LINT_APPEARED = "lint.appeared"  # a structure verifier finding the parent revision did not have
LINT_RESOLVED = "lint.resolved"  # a finding of the parent revision that this one no longer has
EVENT_KINDS = (REVISION_INGESTED, ESTIMATE_CHANGED, ADVISORY_PUBLISHED, REPO_VISIBILITY_CHANGED, DERIVATIVES_REACHED,
               DERIVATIVE_CAUGHT_UP, REPO_GONE, REPO_DISABLED, REPO_GATED, REPO_BRANCH_MISSING, REPO_RESTORED, REPO_MOVED,
               REPO_HISTORY_SQUASHED, LINT_APPEARED, LINT_RESOLVED, COST_CHANGED)
EVENT_KIND_DESCRIPTIONS = {
    REVISION_INGESTED: "A new commit of a watched repo was ingested: one event per revision, with the kinds and summaries of "
                       "its changes (or a baseline, the first time a repo is watched).",
    ESTIMATE_CHANGED: "The parameters or memory estimate of a revision changed from its parent's.",
    COST_CHANGED: "What a run costs on some card (a training run's USD or hours, serving's USD per million tokens or "
                  "tokens/s) moved by more than [cost] change_threshold (10% by default) from the parent revision's "
                  "estimate; the detail holds every card's figures before and after. Warning when dearer, notice when "
                  "cheaper.",
    ADVISORY_PUBLISHED: "An OSV advisory (or one of hubwatch's own advisories) now applies to a watched repo, or was "
                        "modified or withdrawn.",
    REPO_VISIBILITY_CHANGED: "A watched repo was made private or public, gated or ungated, without a new commit.",
    DERIVATIVES_REACHED: "A behaviour change of a base model, and how many of its followed derivatives carry it.",
    DERIVATIVE_CAUGHT_UP: "A followed derivative was re-uploaded with a base model's change it lacked.",
    REPO_GONE: "A watched repo is gone from the Hub: deleted, or made private (to anyone without access the two look "
               "alike); its history stays. Critical: whatever loads it now fails.",
    REPO_DISABLED: "The Hub disabled a watched repo (\"Access to this resource is disabled.\"): nothing of it can be "
                   "read until the Hub restores it. Critical.",
    REPO_GATED: "A watched repo's files are refused to hubwatch's token: the repo is gated (with its mode) and access "
                "has not been granted. Warning.",
    REPO_BRANCH_MISSING: "A watched repo's branch no longer exists (deleted) while the repo does. Critical: loading "
                         "that revision name fails.",
    REPO_MOVED: "A watched repo was renamed on the Hub: its old name answers 307 to the new one, which the detail names "
                "(`moved_to`); polling follows the redirect and the history stays under the watched name. Warning.",
    REPO_HISTORY_SQUASHED: "A watched branch's history was squashed on the Hub (super-squash): the commits seen before "
                           "are no longer on it, the new commit holds the same files. What was stored is kept, and the "
                           "squash is not reported as a rewrite (no content changed). Warning.",
    LINT_APPEARED: "The structure verifier finds in a revision what its parent did not have (a vocab_size that no longer "
                   "matches the embedding, a shard the index names that is gone, ...): the findings, with their "
                   "evidence and fix, in the detail; at the severity of the worst. See the verifier's lints.",
    LINT_RESOLVED: "A structure verifier finding of the parent revision is gone from this one. Notice.",
    REPO_RESTORED: "A watched repo answers again after being gone, disabled, gated or without its branch: polling "
                   "resumes where the stored history ends, every commit since stored. Notice.",
}

# What a dataset revision changed (tracker/differs/dataset.py): each a Change of kind `dataset` in its revision's
# event, and (at notice or above) an event of its own, so a subscription can ask for exactly these.
DATASET_EVENT_DESCRIPTIONS = {
    "dataset.rows_added": "Rows were added to a split of a config (the counts before and after, from the Parquet "
                          "footers or counted JSON Lines/CSV files). Notice.",
    "dataset.rows_removed": "Rows were removed from a split of a config (the counts before and after). Warning.",
    "dataset.rows_removed_latest_required": "Rows were removed from a dataset whose licence requires using its latest "
                                            "version (the watch's `licence_requires_latest`): copies made before must "
                                            "drop them too. Critical.",
    "dataset.columns_added": "Columns were added to a config's splits (with their HF feature types); warning when only "
                             "some of its splits have them (load_dataset casts every split to one schema).",
    "dataset.columns_removed": "Columns were removed from a config's splits. Warning.",
    "dataset.columns_retyped": "Columns of a config changed type: HF feature types (ClassLabel names, Sequence, "
                               "Value(\"int64\")), or Arrow types where the files state no features. Warning.",
    "dataset.config_added": "A config appeared (a new first argument for load_dataset). Notice.",
    "dataset.config_removed": "A config is gone: the load_dataset call naming it now fails (the summary says which "
                              "call). Critical.",
    "dataset.config_renamed": "A config was renamed (the same files or rows under a new name): the load_dataset call "
                              "naming the old one fails. Critical.",
    "dataset.split_added": "A split appeared in a config. Notice.",
    "dataset.split_removed": "A split is gone from a config: load_dataset(..., split=...) naming it now fails. Critical.",
    "dataset.split_renamed": "A split was renamed (the same files or rows under a new name): load_dataset(..., split=...) "
                             "naming the old one fails. Critical.",
    "dataset.licence_changed": "The licence the dataset card declares changed. Warning.",
    "dataset.gating_changed": "The dataset was gated, ungated, or its gate changed mode (auto, manual). Warning.",
    "dataset.loading_script_added": "A loading script (`<name>.py`) appeared: datasets before 4.0 run its code "
                                    "(trust_remote_code), 4.0 and later refuse it. Warning, security-relevant.",
    "dataset.script_only": "Only a loading script is left, no data files: load_dataset fails with datasets 4.0 and "
                           "later (\"Dataset scripts are no longer supported\"). Critical.",
    "dataset.reuploaded": "Data files were rewritten with the same columns and rows (a re-upload): new content ids, "
                          "nothing a reader sees changed. Info.",
    "dataset.card_mismatch": "The card's declared num_examples disagree with the rows the files hold. Notice.",
    "dataset.file_unreadable": "A data file's footer or first range could not be read, or contradicts itself "
                               "(truncated, corrupt, claiming rows or columns its data does not hold): its verdict "
                               "names why; the rest of the revision is read. Notice.",
}
DATASET_EVENT_KINDS = tuple(DATASET_EVENT_DESCRIPTIONS)
EVENT_KINDS = (*EVENT_KINDS, *DATASET_EVENT_KINDS)
EVENT_KIND_DESCRIPTIONS.update(DATASET_EVENT_DESCRIPTIONS)

# What the Hub did to a watched repo itself, as its answers tell (the watch's `repo_state`), with the event
# each change to it is announced by and that event's severity.
REPO_STATES = ("active", "gone", "gated", "disabled", "branch_missing", "moved")
REPO_STATE_DESCRIPTIONS = {
    "active": "The repo and its branch answer as usual.",
    "gone": "The Hub answers RepoNotFound: deleted, or private to this token (401 without a token, 404 with one; "
            "without a token with access the two look alike).",
    "gated": "The repo lists its files but refuses to serve them (GatedRepo): access not granted to this token.",
    "disabled": "The Hub answers 403 \"Access to this resource is disabled.\"",
    "branch_missing": "The repo answers but the watched branch does not exist (RevisionNotFound).",
    "moved": "The repo was renamed: the watched name answers 307 to another (`moved_to`), followed.",
}
REPO_STATE_EVENTS = {"active": REPO_RESTORED, "gone": REPO_GONE, "gated": REPO_GATED, "disabled": REPO_DISABLED,
                     "branch_missing": REPO_BRANCH_MISSING, "moved": REPO_MOVED}
REPO_STATE_SEVERITIES = {"active": "notice", "gone": "critical", "gated": "warning", "disabled": "critical",
                         "branch_missing": "critical", "moved": "warning"}
# The states a watch is no longer polled in on its own after `[poll] park_after` polls in a row met them.
PARKED_STATES = ("gone", "disabled")
# The states in which a branch's revisions cannot be fetched from the Hub at all (gated: with a granted token).
UNFETCHABLE_STATES = ("gone", "disabled", "branch_missing")

# How a derivative relates to its base (a card's `base_model_relation`; the Hub's `base_model:<relation>:<id>` tags).
DERIVATIVE_RELATIONS = ("quantized", "finetune", "adapter", "merge")
# The parts of a model that decide how it talks, compared between a base and its derivatives, with their words.
BEHAVIOUR_PARTS = {"chat_template": "chat template", "special_tokens": "special tokens", "stop_tokens": "stop set",
                   "vocabulary": "vocabulary", "generation": "generation defaults"}

# The plain words a `kind` filter takes: a change kind, or `advisory` for every `advisory.*` event.
FILTER_WORDS = (*CHANGE_KINDS, "advisory")
# Any dotted event kind (`revision.ingested`), also one a later version adds.
EVENT_KIND_PATTERN = r"[a-z][a-z_]*\.[a-z][a-z_]*"

# How outbound webhooks are written: a signed Standard Webhook (generic), a Slack or Discord message, or a
# notification through Apprise to the service its URL names (mailto://, tgram://, ntfys://, json://, ...).
WEBHOOK_FORMATS = ("generic", "slack", "discord", "apprise")
# Those POSTed to an http(s) URL (the others name a service, and its credentials, in an Apprise URL: no
# secret), and those whose every delivery is signed, so a subscription needs a secret. The rest of what a
# format is lives in its module under feeds/webhooks (feeds.webhooks.formats.WebhookFormat).
HTTP_WEBHOOK_FORMATS = ("generic", "slack", "discord")
SIGNED_WEBHOOK_FORMATS = ("generic",)

# The Hub's repo ids: `org/name`, each half a name.
REPO_NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}"
REPO_ID_PATTERN = rf"{REPO_NAME_PATTERN}/{REPO_NAME_PATTERN}"
REPO_ID_RE = re.compile(rf"^{REPO_ID_PATTERN}$")

# The kinds of Hub repo a watch follows, and how each is keyed: a model by its id (`org/name`), a dataset by the
# Hub's own URL path for it (`datasets/org/name`; no user or org may be called `datasets` on the Hub), so a model
# and a dataset of the same name are two watches, two histories, and every place that joins the key to the Hub's
# address (`https://huggingface.co/<key>`, `/repos/<key>` here) names the right repo.
REPO_TYPES = ("model", "dataset")
REPO_TYPE_DESCRIPTIONS = {
    "model": "A model repo (the default): `org/name`, at https://huggingface.co/org/name.",
    "dataset": "A dataset repo: `org/name` with `--type dataset` (or `datasets/org/name`), at "
               "https://huggingface.co/datasets/org/name; stored under the key `datasets/org/name`.",
}
REPO_KEY_PREFIXES = {"model": "", "dataset": "datasets/"}
REPO_KEY_PATTERN = rf"(?:datasets/)?{REPO_ID_PATTERN}"

# A branch as git (check-ref-format --branch) and the Hub allow it, or one of the Hub's pull-request refs
# (`refs/pr/1`): printable ASCII without space or ~^:?*[\\, no `..`, `//`, `@{` or component starting
# with `.`, no leading `-`, `/` or `.`, no trailing `/`, `.` or `.lock` (of any component), not `@`
# alone. An ECMA-262 and Python pattern both, so the OpenAPI document states the rule exactly.
BRANCH_MAX_CHARS = 200
BRANCH_PATTERN = (
    r"(?![-/.])(?!@$)"
    r"(?!.*(?:\.\.|//|/\.|@\{|\.lock/|[/.]$|\.lock$))"
    r"(?!refs/(?!pr/[0-9]+$))"
    rf"[!-)+-9;->@-Z\]_-}}]{{1,{BRANCH_MAX_CHARS}}}"
)
BRANCH_RE = re.compile(BRANCH_PATTERN)
BRANCH_RULES = (
    "printable ASCII without spaces or ~^:?*[\\; no '..', '//' or '@{'; no part starting with '.'; "
    f"not starting with '-', '/' or '.'; not ending with '/', '.' or '.lock'; at most {BRANCH_MAX_CHARS} characters; "
    "under refs/ only the Hub's pull requests (refs/pr/N)"
)


def at_least(min_severity: str) -> tuple[str, ...]:
    """The severities at or above `min_severity` (ValueError names the allowed ones)."""
    if min_severity not in SEVERITY_RANK:
        raise ValueError(f"min_severity must be one of {', '.join(SEVERITIES)}, got {min_severity!r}")
    return SEVERITIES[SEVERITY_RANK[min_severity]:]


def is_repo_id(value: object) -> bool:
    """`org/name` as the Hub allows it (no `..`, which would read as a path)."""
    return isinstance(value, str) and REPO_ID_RE.match(value) is not None and ".." not in value


def repo_key(repo_id: str, repo_type: str = "model") -> str:
    """The stored key of a Hub repo: `org/name` for a model, `datasets/org/name` for a dataset (ValueError for
    another type). A key given as `repo_id` is returned as it is when it is of `repo_type` already."""
    if repo_type not in REPO_KEY_PREFIXES:
        raise ValueError(f"repo type must be one of {', '.join(REPO_TYPES)}, got {repo_type!r}")
    prefix = REPO_KEY_PREFIXES[repo_type]
    return repo_id if prefix and repo_id.startswith(prefix) else prefix + repo_id


def split_repo_key(key: str) -> tuple[str, str]:
    """(repo type, Hub repo id) of a stored key: `datasets/org/name` is ("dataset", "org/name"), anything else a
    model's id as it is."""
    if key.startswith(REPO_KEY_PREFIXES["dataset"]) and key.count("/") == 2:
        return "dataset", key[len(REPO_KEY_PREFIXES["dataset"]):]
    return "model", key


def repo_type_of(key: str) -> str:
    """"dataset" for a dataset's key (`datasets/org/name`), else "model"."""
    return split_repo_key(key)[0]


def org_of(key: str) -> str:
    """The org or user a stored key belongs to (`org` of `org/name` and of `datasets/org/name`)."""
    return split_repo_key(key)[1].split("/", 1)[0]


def is_repo_key(value: object) -> bool:
    """A model's id (`org/name`) or a dataset's key (`datasets/org/name`); `datasets/x` is neither (no user or org
    may be called `datasets` on the Hub)."""
    if not isinstance(value, str):
        return False
    repo_type, hub_id = split_repo_key(value)
    return is_repo_id(hub_id) and (repo_type == "dataset" or not value.startswith(REPO_KEY_PREFIXES["dataset"]))


def short_dataset_name(value: object) -> str | None:
    """The canonical short name a dataset had before the Hub moved it under an org (`wikitext` of `wikitext` or of
    `datasets/wikitext`, the Hub's URL path for it); None for anything else. Never a stored key: it is resolved
    through the Hub to the org name (`datasets/Salesforce/wikitext`) before anything is kept."""
    if not isinstance(value, str):
        return None
    name = value.removeprefix(REPO_KEY_PREFIXES["dataset"])
    return name if "/" not in name and is_repo_id(f"x/{name}") else None


def is_branch_name(value: object) -> bool:
    """A branch name git and the Hub accept (`main`, `v1.0`, `feature/x`) or a Hub PR ref (`refs/pr/1`)."""
    return isinstance(value, str) and len(value) <= BRANCH_MAX_CHARS and BRANCH_RE.fullmatch(value) is not None


def is_filter_kind(kind: str) -> bool:
    """A change kind (`chat_template`), `advisory`, or a dotted event kind (`revision.ingested`)."""
    return kind in FILTER_WORDS or re.fullmatch(EVENT_KIND_PATTERN, kind) is not None


def repo_purl(key: str, sha: str | None = None) -> str | None:
    """A stored repo's package URL: a model's `model_purl`; None for a dataset, which no purl type names (the
    registered `huggingface` type is for models; the BOM names a dataset by its Hub URL instead)."""
    return None if repo_type_of(key) == "dataset" else model_purl(key, sha)


def model_purl(repo_id: str, sha: str | None = None) -> str:
    """The package URL of a Hub model (the registered `huggingface` purl type): `pkg:huggingface/org/name@sha`,
    the commit sha lowercase as the purl spec asks; without `sha`, the model across revisions."""
    from packageurl import PackageURL

    namespace, _, name = repo_id.partition("/")
    return PackageURL(type="huggingface", namespace=namespace, name=name, version=sha.lower() if sha else None).to_string()
