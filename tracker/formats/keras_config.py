"""A `.keras` archive's `config.json`: the layers that carry code.

A Keras 3 `.keras` file is a zip of `config.json`, `metadata.json` and the weights. Loading runs code
when a layer is a `Lambda` (its function is marshalled Python bytecode, run with `safe_mode=False`) or
a class from outside Keras (`module` not under `keras`, or a `registered_name` of a custom object).
Each is reported as an import: Lambda layers and functions as dangerous (through the rules), other
classes by module and name, for the rules to judge (unknown unless listed).
"""

from __future__ import annotations

import json
from typing import Any

CODE_LAYERS = {"Lambda", "TFOpLambda", "__lambda__", "function"}
MAX_DEPTH = 64


def keras_imports(config_json: bytes) -> tuple[list[tuple[str, str, str]], str | None]:
    """(module, name, where) for every code-bearing object in config.json, and a note when unreadable."""
    try:
        config = json.loads(config_json)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as err:
        return [], f"config.json is not JSON: {err}"
    found: list[tuple[str, str, str]] = []
    _walk(config, "config", found, 0)
    return found, None


def _walk(node: Any, where: str, found: list[tuple[str, str, str]], depth: int) -> None:
    if depth > MAX_DEPTH:
        found.append(("<keras>", "config nested too deep", where))
        return
    if isinstance(node, list):
        for i, item in enumerate(node):
            _walk(item, f"{where}[{i}]", found, depth + 1)
        return
    if not isinstance(node, dict):
        return
    class_name = node.get("class_name")
    if isinstance(class_name, str):
        module = node.get("module")
        label = f"{where}:{(node.get('config') or {}).get('name', class_name) if isinstance(node.get('config'), dict) else class_name}"
        if class_name in CODE_LAYERS:
            found.append(("keras.layers", "Lambda", label))
        elif isinstance(module, str) and module and module.split(".")[0] not in ("keras", "builtins"):
            found.append((module, class_name, label))
        elif isinstance(node.get("registered_name"), str) and node["registered_name"] != class_name:
            found.append(("<keras custom object>", node["registered_name"], label))
    for key, value in node.items():
        if isinstance(value, dict | list):
            _walk(value, f"{where}.{key}", found, depth + 1)
