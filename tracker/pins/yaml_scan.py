"""Pins in YAML deployment files, read as YAML (PyYAML's node graph: comments, anchors and positions kept):
Kubernetes containers and compose services (`command` / `args` / `entrypoint` and `env` / `environment`),
Helm values and other mappings (`model` / `revision` keys), and shell commands in any string
(`run: hf download ORG/NAME --revision SHA`).

A repo and a revision are paired only inside one container, service, mapping or string: a container's
argv is its command then its args, each item split like a shell word list, `--flag=value` split at `=`, and
a Kubernetes `$(VAR)` (in a shell string also `$VAR` and `${VAR}`) replaced by the container's own `env`
value, whose characters are then the ones `--write` edits. A revision flag pairs with the nearest model
flag of its group before it (else the nearest after): `--model` with `--revision`, `--tokenizer` with
`--tokenizer-revision`. Environment variables pair by runtime (`MODEL_ID` + `REVISION`, ...): see
`tracker.pins.pin_forms`; text-generation-inference's launcher also pairs `--model-id` in the argv with
`REVISION` in the env, and `MODEL_ID` in the env with `--revision` in the argv.

A YAML file is hostile input: one that does not parse, nests deeper than the parser can follow, or whose
aliases expand past `MAX_EXPANDED_NODES` nodes (a billion-laughs bomb, anchors merged into huge
structures, a recursive alias) is named in `skipped` and the rest of the tree is scanned. Each node is read
once, however many aliases reach it, so no file costs more than its own size.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

import yaml

from storage.kinds import repo_key, short_dataset_name
from tracker.formats.local_files import clipped
from tracker.pins.pin_forms import (
    DATASET_KEYS,
    DATASET_KWARGS_KEY,
    DATASET_LIST_KEYS,
    DATASET_LIST_REVISION_KEYS,
    DATASET_REVISION_KEYS,
    ENV_PAIRS,
    FLAG_GROUPS,
    MODEL_KEYS,
    PACKAGED_BUILDERS,
    POSITIONAL_COMMANDS,
    REVISION_KEYS,
    SHORT_NAME_DATASET_KEYS,
    WEAK_DATASET_KEYS,
    WEAK_MODEL_KEYS,
    CodePin,
    CodeScan,
    looks_like_repo,
)

YAML_SUFFIXES = frozenset({".yaml", ".yml"})
MAX_EXPANDED_NODES = 1_000_000  # nodes a file may stand for once its aliases and merges are expanded
ARGV_KEYS = ("entrypoint", "command", "args")  # compose's entrypoint then command; Kubernetes' command then args
LAUNCHER_MODEL_FLAG = "--model-id"  # text-generation-inference's and text-embeddings-inference's spelling
ENV_KEYS = ("env", "environment", "Environment")  # Kubernetes, compose, CloudFormation (SageMaker)
MERGE_TAG = "tag:yaml.org,2002:merge"
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when built with it: the same nodes, ~10x faster
_WORD = re.compile(r"""(?:[^\s'"\\]+|\\.|'[^']*'|"(?:[^"\\]|\\.)*")+""", re.S)
_UNQUOTE = re.compile(r"""\\(.)|'([^']*)'|"((?:[^"\\]|\\.)*)"|([^'"\\]+)""", re.S)
_VAR = re.compile(r"^\$\((\w+)\)$")  # Kubernetes' dependent variable
_SHELL_VAR = re.compile(r"^\$(?:\{(\w+)\}|(\w+))$")
_SEPARATORS = frozenset({"&&", "||", ";", "|", "&"})


class RefusedYaml(Exception):
    """A YAML file read no further, and why (a line of `skipped`)."""


@dataclass(frozen=True)
class Word:
    """One argv word or value: its text, and where its characters are (a scalar node, and the word's offset
    in the node's value), None when they are not verbatim in the file."""

    text: str
    node: yaml.ScalarNode | None
    at: int = 0


def scan_yaml(scan: CodeScan, text: str, shown: str) -> None:
    """Add the pins of one YAML file (all its documents) to `scan`; a file refused is named in `skipped`."""
    try:
        documents = list(yaml.compose_all(text, Loader=_LOADER))
        if "&" in text:  # no anchor, no alias: a document stands for no more nodes than it holds
            for document in documents:
                _check_size(document)
    except yaml.YAMLError as err:
        hint = " (a template: its pins are in the values it is rendered with)" if "{{" in text else ""
        scan.skipped.append((shown, f"does not parse as YAML{hint}: {clipped(_yaml_error(err), 160)}"))
        return
    except RecursionError:
        scan.skipped.append((shown, "does not parse as YAML: nested too deep"))
        return
    except RefusedYaml as err:
        scan.skipped.append((shown, str(err)))
        return
    reader = _Reader(text, shown)
    for document in documents:
        if document is not None:
            reader.walk(document)
    for pin in reader.pins():
        scan.add(pin)


def _yaml_error(err: yaml.YAMLError) -> str:
    mark = getattr(err, "problem_mark", None)
    problem = getattr(err, "problem", None) or str(err).splitlines()[0]
    return f"{problem} (line {mark.line + 1})" if mark is not None else problem


def _check_size(root: yaml.Node) -> None:
    """Refuse a document whose aliases and merges stand for more than MAX_EXPANDED_NODES nodes, or for an
    endless structure (an alias inside its own anchor), computed once per node (never by expanding)."""
    size: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            on_path.discard(key)
            size[key] = 1 + sum(size[id(c)] for c in _children(node))
            if size[key] > MAX_EXPANDED_NODES:
                raise RefusedYaml(f"its aliases expand to more than {MAX_EXPANDED_NODES:,} nodes (a YAML bomb?): not read")
            continue
        if key in size:
            continue
        if key in on_path:
            raise RefusedYaml("an alias refers to its own anchor (an endless structure): not read")
        on_path.add(key)
        stack.append((node, True))
        stack += [(c, False) for c in _children(node) if id(c) not in size]


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


class _Reader:
    """The pins of one file's node graph: each node read once; a pin found twice (an anchored container
    reused by alias) is kept once."""

    def __init__(self, text: str, shown: str) -> None:
        self.text, self.shown = text, shown
        self.found: dict[tuple[object, ...], CodePin] = {}
        self.claimed: set[int] = set()  # scalars read as a container's argv or env, not again as shell strings
        self.line_starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def walk(self, root: yaml.Node) -> None:
        seen: set[int] = set()
        stack = [root]
        while stack:
            node = stack.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            if isinstance(node, yaml.MappingNode):
                self._mapping(node)
            elif isinstance(node, yaml.ScalarNode) and id(node) not in self.claimed and _is_command(node):
                self._argv(_words([node]))
            stack += reversed(_children(node))

    def pins(self) -> list[CodePin]:
        """The pins found; a model use also found pinned (a merged-in template read on its own) is not unpinned too."""
        pinned = {key[:2] for key, pin in self.found.items() if pin.revision is not None}
        return [pin for key, pin in self.found.items() if pin.revision is not None or key[:2] not in pinned]

    # -- one mapping: a container or service, and model/revision keys -----------------------------

    def _mapping(self, node: yaml.MappingNode) -> None:
        pairs = _pairs(node)
        argv_nodes = [pairs[k] for k in ARGV_KEYS if k in pairs]
        env_node = next((pairs[k] for k in ENV_KEYS if k in pairs), None)
        env, k8s = _environment(env_node) if env_node is not None else ({}, False)
        if argv_nodes:
            items = [n for a in argv_nodes for n in (a.value if isinstance(a, yaml.SequenceNode) else [a])]
            scalars = [n for n in items if isinstance(n, yaml.ScalarNode)]
            self.claimed.update(id(n) for n in scalars)
            words = [_resolved(w, env if k8s else {}) for w in _words(scalars)]
            self._argv(words)
            self._launcher_pair(words, env)
        for model_key, revision_key in ENV_PAIRS:
            model = env.get(model_key)
            if model is not None and looks_like_repo(model.text):
                self._pin(model, env.get(revision_key))
        self.claimed.update(id(w.node) for w in env.values())
        keyed = {k: v for k, v in pairs.items() if isinstance(v, yaml.ScalarNode) and _is_str(v)}
        revision = next((_value_word(keyed[k]) for k in REVISION_KEYS if k in keyed), None)
        strong = [keyed[k] for k in MODEL_KEYS if k in keyed and looks_like_repo(keyed[k].value)]
        weak = [keyed[k] for k in WEAK_MODEL_KEYS if k in keyed and looks_like_repo(keyed[k].value)]
        if strong:
            self._pin(_value_word(strong[0]), revision)
        elif weak and revision is not None:
            self._pin(_value_word(weak[0]), revision)
        plain = _value_word(keyed["revision"]) if "revision" in keyed and not strong and not (weak and revision) else None
        self._datasets(pairs, keyed, plain)

    # -- datasets: training and evaluation configs ----------------------------------------------------

    def _datasets(self, pairs: dict[str, yaml.Node], keyed: dict[str, yaml.ScalarNode], plain: Word | None) -> None:
        """A mapping's dataset and its revision (`dataset_revision`, lm-eval's `dataset_kwargs.revision`, else a
        `revision` no model of the mapping takes), and Axolotl's `datasets:` items (`path` + `revision`)."""
        revision = next((_value_word(keyed[k]) for k in DATASET_REVISION_KEYS if k in keyed), None)
        kwargs = pairs.get(DATASET_KWARGS_KEY)
        if revision is None and isinstance(kwargs, yaml.MappingNode):
            inner = _pairs(kwargs).get("revision")
            if isinstance(inner, yaml.ScalarNode) and _is_str(inner):
                revision = _value_word(inner)
        revision = revision or plain
        strong = [keyed[k] for k in DATASET_KEYS if k in keyed and looks_like_repo(keyed[k].value)]
        weak = [keyed[k] for k in WEAK_DATASET_KEYS if k in keyed and looks_like_repo(keyed[k].value)]
        short = [keyed[k] for k in SHORT_NAME_DATASET_KEYS if k in keyed and _short_dataset(keyed[k].value)]
        if strong:
            self._pin(_value_word(strong[0]), revision, dataset=True)
        elif weak and revision is not None:
            self._pin(_value_word(weak[0]), revision, dataset=True)
        elif short and revision is not None:
            self._pin(_value_word(short[0]), revision, dataset=True)
        for list_key in DATASET_LIST_KEYS:
            items = pairs.get(list_key)
            for item in items.value if isinstance(items, yaml.SequenceNode) else ():
                if not isinstance(item, yaml.MappingNode):
                    continue
                entry = {k: v for k, v in _pairs(item).items() if isinstance(v, yaml.ScalarNode) and _is_str(v)}
                path = entry.get("path")
                pinned = next((_value_word(entry[k]) for k in DATASET_LIST_REVISION_KEYS if k in entry), None)
                if path is not None and pinned is not None and looks_like_repo(path.value):
                    self._pin(_value_word(path), pinned, dataset=True)

    # -- argv: flags and positional models ---------------------------------------------------------

    def _launcher_pair(self, words: list[Word], env: dict[str, Word]) -> None:
        """text-generation-inference's and text-embeddings-inference's launchers read each flag from its
        variable too: `--model-id ORG/NAME` with `REVISION` in the env (and no `--revision`, no `MODEL_ID`),
        or `MODEL_ID` in the env with `--revision SHA` (and no model flag, no `REVISION`) is one pin."""
        model_flags, revision_flags = FLAG_GROUPS[0]
        flags = [w.text for w in words[:-1]]
        model = next((words[i + 1] for i, f in enumerate(flags) if f == LAUNCHER_MODEL_FLAG), None)
        revision = next((words[i + 1] for i, f in enumerate(flags) if f in revision_flags), None)
        has_model = any(f in model_flags for f in flags) or any(
            (flags[i - 1].rsplit("/", 1)[-1], flags[i]) in POSITIONAL_COMMANDS for i in range(1, len(flags)))
        has_revision = revision is not None
        if model is not None and looks_like_repo(model.text) and not has_revision and "MODEL_ID" not in env and "REVISION" in env:
            self._pin(model, env["REVISION"])
        elif revision is not None and not has_model and "REVISION" not in env and "MODEL_ID" in env:
            if looks_like_repo(env["MODEL_ID"].text) and not revision.text.startswith("$"):
                self._pin(env["MODEL_ID"], revision)

    def _argv(self, words: list[Word]) -> None:
        models: list[tuple[int, int, Word]] = []  # (index of the value, flag group, value)
        revisions: list[tuple[int, int, Word]] = []
        for i, word in enumerate(words[:-1]):
            following = words[i + 1]
            for group, (model_flags, revision_flags) in enumerate(FLAG_GROUPS):
                if word.text in model_flags and looks_like_repo(following.text):
                    models.append((i + 1, group, following))
                elif word.text in revision_flags:
                    revisions.append((i + 1, group, following))
            if i > 0 and (words[i - 1].text.rsplit("/", 1)[-1], word.text) in POSITIONAL_COMMANDS and looks_like_repo(following.text):
                models.append((i + 1, 0, following))
        paired: set[int] = set()
        for index, group, revision in revisions:
            before = [m for m in models if m[1] == group and m[0] < index]
            after = [m for m in models if m[1] == group and m[0] > index]
            model = before[-1] if before else (after[0] if after else None)
            if model is not None and not revision.text.startswith("$"):
                paired.add(model[0])
                self._pin(model[2], revision)
            elif model is not None:
                paired.add(model[0])  # a revision set at run time: not ours to read, and not unpinned either
        for index, _, model in models:
            if index not in paired:
                self._pin(model, None)

    # -- pins and where their characters are -------------------------------------------------------

    def _pin(self, model: Word, revision: Word | None, dataset: bool = False) -> None:
        """A pin of the model `model` names, or with `dataset` of the dataset (its key, `datasets/ORG/NAME`)."""
        repo_id = repo_key(model.text, "dataset") if dataset else model.text
        model_at = self._offset(model)
        if revision is None:
            line = self._line(model_at) if model_at is not None else _node_line(model.node)
            self.found.setdefault((repo_id, model_at, None), CodePin(self.shown, line, repo_id))
            return
        start = self._offset(revision)
        line = self._line(start) if start is not None else _node_line(revision.node)
        end = start + len(revision.text) if start is not None else None
        plain = revision.node is not None and not revision.node.style and revision.node.value == revision.text
        key = (repo_id, model_at, revision.text, start if start is not None else (id(revision.node), revision.at))
        self.found.setdefault(key, CodePin(self.shown, line, repo_id, revision.text, start=start, end=end, yaml_plain=plain))

    def _offset(self, word: Word) -> int | None:
        """Where `word`'s characters start in the file, when the scalar spells them verbatim (a double-quoted
        scalar with no escape at all, no folding inside them): the same occurrence of the text in the node's
        source as in its value."""
        node = word.node
        if node is None:
            return None
        value, low, high = node.value, node.start_mark.index, node.end_mark.index
        if node.style == '"' and "\\" in self.text[low:high]:
            return None  # escapes: the characters in the file are not the value's (`"\x30123..."` holds a sha's "0123...")
        if not word.text or value.count(word.text) != self.text.count(word.text, low, high):
            return None
        nth = value.count(word.text, 0, word.at)
        at = low - 1
        for _ in range(nth + 1):
            at = self.text.find(word.text, at + 1, high)
        return at if at >= 0 else None

    def _line(self, offset: int) -> int:
        return bisect.bisect_right(self.line_starts, offset)


def _short_dataset(value: str) -> bool:
    """lm-eval's `dataset_path: wikitext`: a dataset's canonical short name, not one of the `datasets` library's own
    builders (`json`, `csv`, ...)."""
    return "/" not in value and value not in PACKAGED_BUILDERS and short_dataset_name(value) is not None


def _node_line(node: yaml.Node | None) -> int:
    return node.start_mark.line + 1 if node is not None else 0


def _is_str(node: yaml.ScalarNode) -> bool:
    return node.tag == "tag:yaml.org,2002:str"


def _is_command(node: yaml.ScalarNode) -> bool:
    """Whether a string may hold a command line (more than one word), read for flags like a container's argv."""
    return _is_str(node) and len(node.value.split(None, 1)) > 1


def _value_word(node: yaml.ScalarNode) -> Word:
    return Word(node.value, node, 0)


def _pairs(node: yaml.MappingNode, depth: int = 0) -> dict[str, yaml.Node]:
    """A mapping's keys (scalar keys only) and values, `<<` merges under its own keys, as a loader builds them."""
    own: dict[str, yaml.Node] = {}
    merged: dict[str, yaml.Node] = {}
    for key, value in node.value:
        if key.tag == MERGE_TAG and depth < 32:
            sources = value.value if isinstance(value, yaml.SequenceNode) else [value]
            for source in sources:
                if isinstance(source, yaml.MappingNode):
                    merged = {**_pairs(source, depth + 1), **merged}  # an earlier source wins, as in YAML's merge
        elif isinstance(key, yaml.ScalarNode):
            own[key.value] = value
    return {**merged, **own}


def _environment(node: yaml.Node) -> tuple[dict[str, Word], bool]:
    """A container's environment as words by name, and whether it is a Kubernetes `env` list (whose values
    `$(VAR)` refers to): `- name: K` / `value: V` items, a compose map `K: V`, or a compose list `- K=V`."""
    env: dict[str, Word] = {}
    k8s = False
    if isinstance(node, yaml.MappingNode):
        for name, value in _pairs(node).items():
            if isinstance(value, yaml.ScalarNode) and value.tag != "tag:yaml.org,2002:null":
                env[name] = _value_word(value)
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            if isinstance(item, yaml.MappingNode):
                k8s = True
                pairs = _pairs(item)
                name, value = pairs.get("name"), pairs.get("value")
                if isinstance(name, yaml.ScalarNode) and isinstance(value, yaml.ScalarNode):
                    env[name.value] = _value_word(value)
            elif isinstance(item, yaml.ScalarNode) and "=" in item.value:
                name, _, text = item.value.partition("=")
                env[name] = Word(text, item, len(name) + 1)
    return env, k8s


def _words(nodes: list[yaml.ScalarNode]) -> list[Word]:
    """The argv of some scalars: each split into shell words (quotes removed), `--flag=value` split at `=`."""
    words: list[Word] = []
    for node in nodes:
        if node.tag == "tag:yaml.org,2002:null":
            continue
        for match in _WORD.finditer(node.value):
            text = _unquote(match.group())
            if not text or text in _SEPARATORS:
                words.append(Word(";", None))  # a command boundary: a flag's value never crosses it
                continue
            at = node.value.find(text, match.start())
            flag, equals, value = text.partition("=")
            if flag.startswith("--") and equals:
                words.append(Word(flag, node, at))
                words.append(Word(value, node, node.value.find(value, at + len(flag) + 1) if value else at))
            else:
                words.append(Word(text, node, at if at >= 0 else 0) if at >= 0 else Word(text, None))
    return words


def _unquote(word: str) -> str:
    """A shell word as the program receives it: quotes removed, `\\x` as `x`, a line continuation dropped."""
    out = []
    for match in _UNQUOTE.finditer(word):
        escaped, single, double, plain = match.groups()
        if escaped is not None:
            out.append("" if escaped == "\n" else escaped)
        elif single is not None:
            out.append(single)
        elif double is not None:
            out.append(re.sub(r"\\(.)", r"\1", double))
        else:
            out.append(plain or "")
    return "".join(out)


def _resolved(word: Word, env: dict[str, Word]) -> Word:
    """A `$(VAR)` word (or a shell `$VAR`) replaced by the container's env value of VAR, when it has one."""
    match = _VAR.match(word.text) or _SHELL_VAR.match(word.text)
    if match is None:
        return word
    name = next(g for g in match.groups() if g)
    return env.get(name, word)
