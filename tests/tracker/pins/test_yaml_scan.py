"""Pins in YAML deployment files (tracker.pins.yaml_scan): the forms read as YAML, pairing only inside one
container, service or mapping, `--write` changing only the sha, and hostile YAML named per file."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from tests.tracker.pins.test_code_scan import SHA_A, SHA_B, tree
from tracker.pins.code_scan import scan_tree
from tracker.pins.code_write import Move, write_moves
from tracker.pins.yaml_scan import MAX_EXPANDED_NODES

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "deploy_pins"

# Every pin of the fixture manifests: (file, line of the sha, repo, sha).
FIXTURE_PINS = {
    ("compose.yaml", 15, "mistralai/Mistral-7B-Instruct-v0.3", "e0bc86c23ce5aae1db576c8cca6f06f1f73af2db"),
    ("compose.yaml", 23, "intfloat/multilingual-e5-large-instruct", "baa7be480a7de1539afce709c8f13f833a510e0a"),
    ("compose.yaml", 28, "google/gemma-2-9b-it", "11c9b309abf73637e4b6f9a3fa1e92e615547819"),
    ("kserve.yaml", 13, "meta-llama/Meta-Llama-3-8B-Instruct", "e1945c40cd546c78e41f1151f4db032b271faeaa"),
    ("runpod-worker.yaml", 16, "NousResearch/Hermes-3-Llama-3.1-8B", "896ea440e5a9e6070e3d8a2774daf2b481ab425b"),
    ("sagemaker.yaml", 12, "microsoft/Phi-3.5-mini-instruct", "af0dfb8029e8a74545d0736d30cb6b58d2f0f3f0"),
    ("sglang.yaml", 19, "Qwen/Qwen2.5-72B-Instruct", "d3d951150c1e5848237cd6a7ad11df4836aee842"),
    ("sglang.yaml", 34, "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B", "916b56a44061fd5cd7d6a8fb632557ed4f724f60"),
    ("values.yaml", 10, "meta-llama/Llama-3.2-3B-Instruct", "5f0b02c75b57c5855da9ae460ce51323ea669d8a"),
    ("values.yaml", 19, "sentence-transformers/all-MiniLM-L6-v2", "c9745ed1d9f207416be6d2e6f8de32d1f16199bf"),
    ("vllm-deployment.yaml", 26, "meta-llama/Llama-3.1-8B-Instruct", "0e9e39f249a16976918f6564b8830bc894c89659"),
    ("vllm-deployment.yaml", 30, "meta-llama/Llama-3.1-8B-Instruct", "0e9e39f249a16976918f6564b8830bc894c89659"),
    ("vllm-deployment.yaml", 46, "Qwen/Qwen2.5-0.5B-Instruct", "7ae557604adf67be50417f59c2c2f167def9a775"),
}


def test_every_pin_of_the_fixture_manifests_is_found_with_its_line() -> None:
    """vLLM, SGLang, TGI/TEI compose, SageMaker, RunPod, Helm values and KServe manifests: each pin, its file and line."""
    scan = scan_tree(FIXTURES)
    assert {(p.path, p.line, p.repo_id, p.sha) for p in scan.pins} == FIXTURE_PINS
    assert [(p.location, p.repo_id, p.branch) for p in scan.branch_pins] == [("vllm-deployment.yaml:70", "BAAI/bge-m3", "main")]
    assert [(p.location, p.repo_id) for p in scan.unpinned] == [("vllm-deployment.yaml:73", "BAAI/bge-reranker-v2-m3")]
    assert scan.problems == [] and scan.skipped == []
    for pin in scan.pins:  # the exact characters --write replaces
        assert (FIXTURES / pin.path).read_text()[pin.start:pin.end] == pin.sha, pin


K8S = """apiVersion: apps/v1
kind: Deployment
spec:
  template:
    spec:
      containers:
        - name: server
          image: vllm/vllm-openai:latest
{body}"""


YAML_FORMS = [
    ("args items", K8S.format(body=(
        f"          args:\n            - --model\n            - org/model\n            - --revision\n            - {SHA_A}\n")), 13),
    ("--flag=value", K8S.format(body=f'          args: ["--model=org/model", "--revision={SHA_A}"]\n'), 9),
    ("one shell string", K8S.format(
        body=f'          command: ["/bin/sh", "-c", "vllm serve org/model --revision {SHA_A} --port 8000"]\n'), 9),
    ("folded block", K8S.format(
        body=f"          args:\n            - >\n              vllm serve org/model\n              --revision {SHA_A}\n"), 12),
    ("$(VAR) from env", K8S.format(body=(
        '          args: ["--model", "org/model", "--revision", "$(REV)"]\n'
        f"          env:\n            - name: REV\n              value: {SHA_A}\n")), 12),
    ("shell $VAR from env", K8S.format(body=(
        '          command: ["sh", "-c", "exec vllm serve org/model --revision ${REV}"]\n'
        f"          env:\n            - name: REV\n              value: '{SHA_A}'\n")), 12),
    ("TGI env list", K8S.format(body=(
        "          env:\n            - name: MODEL_ID\n              value: org/model\n"
        f"            - name: REVISION\n              value: {SHA_A}\n")), 13),
    ("SageMaker env", K8S.format(body=(
        f"          env:\n            - {{name: HF_MODEL_REVISION, value: {SHA_A}}}\n"
        "            - {name: HF_MODEL_ID, value: org/model}\n")), 10),
    ("compose map", f"services:\n  tgi:\n    environment:\n      MODEL_ID: org/model\n      REVISION: {SHA_A}\n", 5),
    ("compose list", f"services:\n  tei:\n    environment:\n      - MODEL_ID=org/model\n      - REVISION={SHA_A}\n", 5),
    ("compose command list", f'services:\n  tgi:\n    command: ["--model-id", "org/model", "--revision", "{SHA_A}"]\n', 3),
    ("helm values", f"model:\n  repository: org/model\n  # pinned\n  revision: \"{SHA_A}\"\n", 4),
    ("workflow run block",
     f"jobs:\n  fetch:\n    steps:\n      - run: |\n          hf download org/model \\\n            --revision {SHA_A}\n", 6),
    ("anchor and alias",
     f"x-rev: &rev {SHA_A}\nservices:\n  tgi:\n    environment:\n      MODEL_NAME: org/model\n      MODEL_REVISION: *rev\n", 1),
    ("merge key", f"x-env: &env\n  REVISION: {SHA_A}\nservices:\n  tgi:\n    environment:\n      <<: *env\n      MODEL_ID: org/model\n", 2),
    ("second document", f"kind: Service\n---\nmodel_id: org/model\nrevision: {SHA_A}\n", 4),
    ("TGI flag and env", K8S.format(body=(
        '          args: ["--model-id", "org/model", "--port", "80"]\n'
        f"          env:\n            - name: REVISION\n              value: {SHA_A}\n")), 12),
    ("TGI env and flag", f"services:\n  tgi:\n    command: --revision {SHA_A} --max-total-tokens 8192\n"
                         "    environment:\n      - MODEL_ID=org/model\n", 3),
]


@pytest.mark.parametrize(("label", "text", "line"), YAML_FORMS)
def test_each_yaml_form_gives_its_repo_sha_and_line(tmp_path: Path, label: str, text: str, line: int) -> None:
    """Each deployment form (args, flags with `=`, shell strings, env references, env pairs, values keys,
    anchors, merges, documents) gives its repo, sha and the line of the sha's characters."""
    root = tree(tmp_path, {"m.yaml": text})
    scan = scan_tree(root)
    assert [(p.repo_id, p.sha, p.line) for p in scan.pins] == [("org/model", SHA_A, line)], (label, scan.unpinned, scan.skipped)
    [pin] = scan.pins
    assert text[pin.start:pin.end] == SHA_A
    assert scan.unpinned == [] and scan.problems == []


UNPAIRED_FORMS = [
    ("two containers", K8S.format(body=(
        '          args: ["--model", "org/model"]\n        - name: sidecar\n'
        f'          args: ["--revision", "{SHA_A}"]\n'))),
    ("two services", f"services:\n  a:\n    environment:\n      MODEL_ID: org/model\n  b:\n    environment:\n      REVISION: {SHA_A}\n"),
    ("sibling mappings", f"chat:\n  model: org/model\nembed:\n  revision: {SHA_A}\n"),
    ("another runtime's variable", f"services:\n  tgi:\n    environment:\n      MODEL_ID: org/model\n      HF_MODEL_REVISION: {SHA_A}\n"),
    ("tokenizer revision", K8S.format(body=f'          args: ["--model", "org/model", "--tokenizer-revision", "{SHA_A}"]\n')),
    ("vLLM flag, TGI variable", K8S.format(body=(
        '          args: ["--model", "org/model"]\n'
        f"          env:\n            - name: REVISION\n              value: {SHA_A}\n"))),
]


@pytest.mark.parametrize(("label", "text"), UNPAIRED_FORMS)
def test_a_repo_and_a_revision_pair_only_in_one_container_service_or_mapping(tmp_path: Path, label: str, text: str) -> None:
    """A model in one container (service, mapping, runtime's variables) and a revision in another are no pin:
    the model is unpinned."""
    scan = scan_tree(tree(tmp_path, {"m.yaml": text}))
    assert scan.pins == [] and [p.repo_id for p in scan.unpinned] == ["org/model"], label


NOT_PINS = K8S.format(body=(
    '          args: ["--model", "/models/llama", "--served-model-name", "org/alias"]\n'
    '        - name: late\n          args: ["--model", "org/model", "--revision", "$(UNSET)"]\n'
    "image:\n  repository: vllm/vllm-openai\n  tag: latest\n"))


def test_what_is_not_a_model_pin_is_left_alone(tmp_path: Path) -> None:
    """An image repository with no revision, a revision set at run time, a served-model name and a local path are no pins."""
    text = NOT_PINS
    scan = scan_tree(tree(tmp_path, {"m.yaml": text}))
    assert scan.pins == [] and scan.unpinned == [] and scan.branch_pins == [] and scan.problems == []


def test_a_pin_reached_through_aliases_twice_is_one_pin(tmp_path: Path) -> None:
    """A container anchored once and aliased into two services is one pin at its one place."""
    text = f"x-server: &server\n  args: [--model, org/model, --revision, {SHA_A}]\nservices:\n  a: *server\n  b: *server\n"
    scan = scan_tree(tree(tmp_path, {"m.yaml": text}))
    assert [(p.repo_id, p.line) for p in scan.pins] == [("org/model", 2)]


def test_short_and_uppercase_shas_in_yaml_are_problems(tmp_path: Path) -> None:
    """The sha checks are the same as in code: a short sha is a problem naming file and line."""
    scan = scan_tree(tree(tmp_path, {"m.yaml": "model: org/model\nrevision: abc1234\n"}))
    assert scan.pins == [] and [loc for loc, _ in scan.problems] == ["m.yaml:2"] and "short sha" in scan.problems[0][1]


BOMB = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 10)}]\n" for i in range(8))  # 10**9 nodes in 300 bytes
MERGED = "m0: &m0 {k: [x, x, x, x, x, x, x, x, x, x]}\n" + "".join(  # each mapping merges the last and lists it 12 times
    f"m{i}: &m{i}\n  <<: *m{i - 1}\n  l: [{', '.join([f'*m{i - 1}'] * 12)}]\n" for i in range(1, 8))


@pytest.mark.parametrize(("name", "content", "why"), [
    ("broken.yaml", "services:\n  tgi:\n    environment: [unclosed\n", "does not parse as YAML"),
    ("template.yaml", "spec:\n  args:\n    {{- toYaml .Values.args | nindent 4 }}\n", "does not parse as YAML (a template"),
    ("bomb.yaml", BOMB, f"expand to more than {MAX_EXPANDED_NODES:,} nodes"),
    ("merged.yaml", MERGED, f"expand to more than {MAX_EXPANDED_NODES:,} nodes"),
    ("loop.yaml", "a: &a [x, *a]\n", "refers to its own anchor"),
    ("deep.yaml", "[" * 20_000 + "]" * 20_000 + "\n", "does not parse as YAML"),
    ("blob.yml", b"\x00\x01binary" * 100, "binary, not text"),
    ("huge.yaml", "x: 1\n" * 300_000, "larger than"),
    ("latin.yaml", "name: caf\xe9\n".encode("latin-1"), "not UTF-8"),
])
def test_hostile_yaml_is_named_per_file_and_the_rest_scanned(tmp_path: Path, name: str, content: str | bytes, why: str) -> None:
    """Invalid YAML, a template, a billion-laughs bomb, merges into a huge structure, a recursive alias, deep
    nesting, a binary, a huge and a non-UTF-8 file: each a note naming it; the good manifest's pin is still found."""
    root = tree(tmp_path, {name: content, "good.yaml": f"model_id: org/model\nrevision: {SHA_A}\n"})
    scan = scan_tree(root)
    reasons = dict(scan.skipped)
    assert why in reasons[name], reasons
    assert [(p.path, p.repo_id) for p in scan.pins] == [("good.yaml", "org/model")]


def test_write_changes_only_the_shas_keeping_comments_anchors_quoting_and_layout(tmp_path: Path) -> None:
    """--write on every fixture manifest: each sha replaced in place (an env value a `$(VAR)` names, a quoted one,
    a merged anchor), the rest byte for byte, and each file parses to the same data with only the sha changed."""
    root = tmp_path / "manifests"
    shutil.copytree(FIXTURES, root)
    before = {p.name: p.read_text() for p in root.iterdir()}
    scan = scan_tree(root)
    new = {pin.sha: f"{i:x}".rjust(40, "f") for i, pin in enumerate(scan.pins)}
    done, left = write_moves(root, [Move(p, new[p.sha or ""]) for p in scan.pins])
    assert left == [] and len(done) == len(FIXTURE_PINS)
    for name, old_text in before.items():
        text = (root / name).read_text()
        expected = old_text
        for old_sha, new_sha in new.items():
            expected = expected.replace(old_sha, new_sha)
        assert text == expected, name
        assert list(yaml.load_all(text, TaggedLoader)) == _replaced(list(yaml.load_all(old_text, TaggedLoader)), new), name
    again = scan_tree(root)
    assert sorted(p.sha for p in again.pins) == sorted(new[p.sha or ""] for p in scan.pins)


class TaggedLoader(yaml.SafeLoader):
    """A safe loader that keeps a CloudFormation tag (`!GetAtt x`) as a (tag, value) pair."""


TaggedLoader.add_multi_constructor("!", lambda loader, suffix, node: (suffix, loader.construct_scalar(node)))


@pytest.mark.parametrize(("line", "written"), [
    (f"revision: {SHA_A}\n", f'revision: "{"1" * 40}"\n'),
    (f"revision: '{SHA_A}'  # keep\n", f"revision: '{'1' * 40}'  # keep\n"),
    (f'revision: "{SHA_A}"\n', f'revision: "{"1" * 40}"\n'),
])
def test_a_sha_yaml_would_read_as_a_number_is_written_quoted(tmp_path: Path, line: str, written: str) -> None:
    """A new sha of digits only, written over a plain scalar, is quoted so the file still holds a string; a quoted one stays as it was."""
    root = tree(tmp_path, {"v.yaml": f"model_id: org/model\n{line}"})
    scan = scan_tree(root)
    done, left = write_moves(root, [Move(p, "1" * 40) for p in scan.pins])
    assert len(done) == 1 and left == []
    assert (root / "v.yaml").read_text() == f"model_id: org/model\n{written}"
    assert yaml.safe_load((root / "v.yaml").read_text())["revision"] == "1" * 40


def _replaced(data: object, shas: dict[str, str]) -> object:
    if isinstance(data, dict):
        return {_replaced(k, shas): _replaced(v, shas) for k, v in data.items()}
    if isinstance(data, list):
        return [_replaced(v, shas) for v in data]
    if isinstance(data, str):
        for old, new in shas.items():
            data = data.replace(old, new)
    return data


def test_a_sha_spelled_with_escapes_is_found_but_left_to_move_by_hand(tmp_path: Path) -> None:
    """A double-quoted sha written with an escape is still a pin on its line; --write leaves it, saying why, rather than guess."""
    escaped = "\\x30" + SHA_A[1:]  # "\x30" is "0"
    root = tree(tmp_path, {"v.yaml": f'model_id: org/model\nrevision: "{escaped}"\n'})
    scan = scan_tree(root)
    [pin] = scan.pins
    assert (pin.sha, pin.line, pin.start) == (SHA_A, 2, None)
    done, left = write_moves(root, [Move(pin, SHA_B)])
    assert done == [] and left == [("v.yaml:2", "the revision is not one plain literal (escapes or concatenation): move it by hand")]
    assert SHA_B not in (root / "v.yaml").read_text()
