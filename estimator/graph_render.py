"""The module graph as the CLI prints it: per tower, its input, the verdict, and the nodes with repeated blocks shown
once (``layers.0-11`` x12)."""

from __future__ import annotations

from .graph import collapse


def shape_text(shape: list | None) -> str:
    """``50 x 768``; a scalar ``scalar``; a dimension that is not a valid size ``?``."""
    if shape is None:
        return "?"
    return " x ".join("?" if d is None else str(d) for d in shape) if shape else "scalar"


def render_structure(structure: dict | None) -> str:
    if not structure:
        return "Structure\n  unknown: no config.json to read the module graph from"
    lines = ["Structure (output shapes propagated from the input, batch excluded)"]
    if structure.get("towers"):
        verdict = "yes" if structure["forward_pass"] else (
            f"no: {structure['failure']['node']}: {structure['failure']['reason']}")
        lines.append(f"  layers {structure['layers'] if structure['layers'] is not None else '?'}, "
                     f"nodes {structure['node_count']:,}; will it forward-pass: {verdict}")
    for tower in structure.get("towers", []):
        t_in = tower["input"]
        lines.append(f"  {tower['name']} tower: {t_in['name']} {shape_text(t_in['shape'])} -> "
                     f"{shape_text(tower['output_shape'])}; {tower['layers'] if tower['layers'] is not None else 'no'}"
                     f" layers, {tower['node_count']} nodes"
                     + ("" if tower["forward_pass"] else f"; stops at {tower['failure']['node']}"))
        rows = tower.get("rows") or collapse(tower["nodes"])
        width = max(len(r["name"]) for r in rows) if rows else 0
        kinds = max(len(r["type"]) for r in rows) if rows else 0
        for row in rows:
            repeat = f"  x{row['repeat']}" if row["repeat"] > 1 else ""
            lines.append(f"    {row['name']:<{width}}  {row['type']:<{kinds}}  {shape_text(row['output_shape'])}{repeat}")
    for note in structure.get("notes", []):
        lines.append(f"  - {note}")
    return "\n".join(lines)
