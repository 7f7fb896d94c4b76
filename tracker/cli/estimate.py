"""`hubwatch estimate`: the estimator on a config file, or on a stored revision of a watched repo."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from estimator import Estimate, EstimateError, render_table
from estimator import estimate as estimate_model
from estimator.graph import structure_graph
from estimator.graph_render import render_structure
from estimator.render import render_serving
from estimator.render_cost import render_cost
from estimator.serving import serving as serving_only
from estimator.split import render_split
from tracker.cli.root import app_of, emit_json, repo_arg
from tracker.config import CostSettings, EstimateSettings
from tracker.errors import HubwatchError

if TYPE_CHECKING:
    from tracker.cli.app import App


class EstimateFailed(HubwatchError):
    """The estimator refused the input (the message names the key); ``config`` is the config.json it refused."""

    def __init__(self, message: str, config: dict | None = None) -> None:
        super().__init__(message)
        self.config = config


@click.command()
@click.argument("repo", required=False)
@click.option("--revision", default=None, help="A stored revision (default: the newest).")
@click.option("--config-file", type=click.Path(exists=True, dir_okay=False), help="Estimate a config.json file.")
@click.option("--manifest", type=click.Path(exists=True, dir_okay=False),
              help="With --config-file: a safetensors header (JSON: name -> {dtype, shape}) to count from.")
@click.option("--seq-len-cap", default=None, type=click.IntRange(1, 1_048_576),
              help="Cap on the sequence length (default: [estimate] seq_len_cap).")
@click.option("--lora-rank", default=None, type=click.IntRange(1, 4096),
              help="LoRA's rank (default: [estimate] lora_rank).")
@click.option("--lora-targets", default=None, metavar="a,b,c|all-linear",
              help="Linear layers LoRA adapts, as PEFT's target_modules (default: [estimate] lora_targets).")
@click.option("--serve", is_flag=True, help="Serving memory per card: KV cache, longest context, concurrency.")
@click.option("--context", "contexts", multiple=True, type=click.IntRange(1, 10_000_000),
              help="With --serve: a context to price beside 8k, 32k and the model's full context (repeatable).")
@click.option("--kv-dtype", type=click.Choice(["auto", "bf16", "fp16", "fp8"]), default=None,
              help="With --serve: the KV cache's dtype (default: [estimate] kv_dtype, the model's own).")
@click.option("--structure", is_flag=True,
              help="Every tower's module graph: each node's module path, type and output shape, the layer count, "
                   "and whether a forward pass goes through (or the first node where it cannot).")
@click.option("--from-hub", is_flag=True,
              help="Read REPO from the Hub even when it is watched (an unwatched REPO always is); nothing is stored.")
@click.option("--cost", "with_cost", is_flag=True,
              help="What a run costs per card: training hours and USD, serving tokens/s and USD per million tokens "
                   "(a roofline estimate; the run and the prices from [cost]).")
@click.option("--json", "as_json", is_flag=True, help="The estimate as JSON.")
@click.pass_context
def estimate(
    ctx: click.Context, repo: str | None, revision: str | None, config_file: str | None, manifest: str | None,
    seq_len_cap: int | None, lora_rank: int | None, lora_targets: str | None, serve: bool,
    contexts: tuple[int, ...], kv_dtype: str | None, structure: bool, from_hub: bool, as_json: bool,
    with_cost: bool = False,
) -> None:
    """Parameters and GPU memory: of a stored revision of REPO, or of a config.json file; with --serve, the
    memory to serve it on each card.

    REPO may be ORG/NAME[@REV] of any Hub repo: one hubwatch does not watch is read from the Hub (config.json and
    the weight headers by range, REV a branch or a 40-hex sha, default main), and nothing is stored."""
    if (repo is None) == (config_file is None):
        raise click.UsageError("give either REPO or --config-file")
    if manifest and not config_file:
        raise click.UsageError("--manifest goes with --config-file")
    if (contexts or kv_dtype) and not serve:
        raise click.UsageError("--context and --kv-dtype go with --serve")
    if from_hub and not repo:
        raise click.UsageError("--from-hub goes with REPO")
    targets = _targets(lora_targets)
    options = EstimateSettings() if config_file else app_of(ctx).settings.estimate
    serving = {"serve_contexts": (*options.serve_contexts, *contexts),
               "kv_dtype": kv_dtype or options.kv_dtype, "gpu_memory_utilization": options.gpu_memory_utilization}
    if with_cost:
        priced = CostSettings() if config_file else app_of(ctx).settings.cost
        serving.update(cost=priced.workload(), cards=priced.card_table())
    try:
        if config_file:
            result, header = estimate_file(config_file, manifest, seq_len_cap or options.seq_len_cap,
                                           lora_rank or options.lora_rank, targets or options.targets,
                                           **serving), None
        else:
            repo, revision = _repo_and_revision(repo, revision)  # type: ignore[arg-type]
            app = app_of(ctx)
            estimate_of = estimate_unwatched if from_hub or not _watched(app, repo) else estimate_revision
            result, header = estimate_of(app, repo, revision, seq_len_cap or options.seq_len_cap,
                                         lora_rank or options.lora_rank, targets or options.targets, **serving)
    except EstimateFailed as err:
        if not (serve or structure) or err.config is None:
            raise
        _serving_only(err, serving, as_json, serve, structure and structure_graph(err.config, seq_len_cap
                                                                                  or options.seq_len_cap))
        return
    out = result.to_dict()
    if not serve:
        out.pop("serving", None)
    if not structure:
        out.pop("structure", None)
    if as_json:
        emit_json({**({"repo_id": repo, **header} if header else {}), **out})
        return
    if header:
        click.echo(f"{repo} at {header['sha'][:12]} ({header['source']})")
    click.echo(render_table(result))
    if result.split:
        click.echo(render_split(result.split))
    if serve:
        click.echo(render_serving(result.serving))
    if structure:
        click.echo(render_structure(result.structure))
    if with_cost:
        click.echo(render_cost(result.cost))


def _serving_only(err: EstimateFailed, options: dict[str, Any], as_json: bool, serve: bool = True,
                  graph: dict | None = None) -> None:
    """--serve or --structure on a config the training estimator refuses (an unmodelled architecture such as
    DeepSeek-V3, absurd sizes): the KV cache and cards still come from config.json, the weights only from a
    manifest; the module graph from config.json, naming the node where a forward pass stops."""
    out: dict[str, Any] = {"error": str(err)}
    if serve:
        section = serving_only(err.config, contexts=options["serve_contexts"], kv_dtype=options["kv_dtype"],
                               gpu_memory_utilization=options["gpu_memory_utilization"])
        section["notes"].insert(0, f"parameters unknown: {err}")
        out["serving"] = section
    if graph:
        out["structure"] = graph
    if as_json:
        emit_json(out)
        return
    click.echo(f"Estimate: {err}")
    if serve:
        click.echo(render_serving(out["serving"]))
    if graph:
        click.echo(render_structure(graph))


def _targets(option: str | None) -> str | tuple[str, ...] | None:
    """--lora-targets: "all-linear" or comma-separated module names; None when not given."""
    if option is None:
        return None
    names = tuple(name.strip() for name in option.split(",") if name.strip())
    if not names or "all-linear" in names and len(names) > 1:
        raise click.BadParameter(f'expected "all-linear" or module names separated by commas, got {option!r}',
                                 param_hint="--lora-targets")
    return "all-linear" if names == ("all-linear",) else names


def _read_json(path: str, what: str) -> Any:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise click.BadParameter(f"{path} is not readable JSON: {err}", param_hint=what) from err


def read_manifest(path: str) -> dict[str, tuple[str, tuple[int, ...]]]:
    """A safetensors header dumped as JSON ({name: {dtype, shape, ...}}, `__metadata__` ignored), or
    several of them in a list (the shards of one checkpoint)."""
    data = _read_json(path, "--manifest")
    headers = data if isinstance(data, list) else [data]
    out: dict[str, tuple[str, tuple[int, ...]]] = {}
    for header in headers:
        if not isinstance(header, dict):
            raise click.BadParameter(f"{path}: expected a safetensors header object", param_hint="--manifest")
        for name, info in header.items():
            if name == "__metadata__":
                continue
            try:
                out[name] = (str(info["dtype"]), tuple(int(d) for d in info["shape"]))
            except (TypeError, KeyError, ValueError) as err:
                raise click.BadParameter(
                    f"{path}: tensor {name!r} needs a dtype and an integer shape", param_hint="--manifest"
                ) from err
    return out


def estimate_file(config_path: str, manifest_path: str | None, seq_len_cap: int, lora_rank: int = 16,
                  lora_targets: str | tuple[str, ...] = "all-linear", **serving: Any) -> Estimate:
    config = _read_json(config_path, "--config-file")
    if not isinstance(config, dict):
        raise click.BadParameter(f"{config_path}: expected a JSON object", param_hint="--config-file")
    manifest = read_manifest(manifest_path) if manifest_path else None
    try:
        result = estimate_model(config, manifest, seq_len_cap=seq_len_cap, lora_rank=lora_rank,
                                lora_targets=lora_targets, **_serving_args(serving))
    except EstimateError as err:
        raise EstimateFailed(f"{config_path}: {err}", config) from err
    result.structure = structure_graph(config, seq_len_cap)
    return result


def _serving_args(serving: dict[str, Any]) -> dict[str, Any]:
    """The settings as estimate() takes them ("auto" is the model's own dtype)."""
    if not serving:
        return {}
    return {**serving, "kv_dtype": None if serving.get("kv_dtype") == "auto" else serving.get("kv_dtype")}


def estimate_revision(app: App, repo_id: str, ref: str | None, seq_len_cap: int, lora_rank: int = 16,
                      lora_targets: str | tuple[str, ...] = "all-linear", **serving: Any
                      ) -> tuple[Estimate, dict[str, Any]]:
    """Estimate a stored revision from its stored config.json and weight headers."""
    # here, not at the top: they load the Hub client, which `estimate --config-file` never needs
    from estimator.gguf_inputs import estimate_gguf
    from tracker.pipeline.estimate_change import gguf_scans, manifest_of
    from tracker.revision.stored import load_snapshot

    revision = app.store.history.revision_at(repo_id, ref)
    snapshot = load_snapshot(app.store, revision)
    config, error = snapshot.read_json("config.json")
    manifest = manifest_of(snapshot)
    ggufs = gguf_scans(snapshot) if config is None and manifest is None and "config.json" not in snapshot.files else {}
    if ggufs:
        try:
            result = estimate_gguf(ggufs, seq_len_cap=seq_len_cap, lora_rank=lora_rank, lora_targets=lora_targets,
                                   **_serving_args(serving))
        except EstimateError as err:
            raise EstimateFailed(f"{repo_id} at {revision.sha[:12]}: from the GGUF header: {err}") from err
        if result is not None:
            return result, {"sha": revision.sha, "source": "GGUF headers"}
    if config is None and manifest is None:
        raise EstimateFailed(f"{repo_id} at {revision.sha[:12]}: nothing to estimate from ({error})")
    try:
        result = estimate_model(config if isinstance(config, dict) else {}, manifest, seq_len_cap=seq_len_cap,
                          lora_rank=lora_rank, lora_targets=lora_targets, **_serving_args(serving))
    except EstimateError as err:
        raise EstimateFailed(f"{repo_id} at {revision.sha[:12]}: {err}",
                             config if isinstance(config, dict) else None) from err
    if isinstance(config, dict):
        result.structure = structure_graph(config, seq_len_cap)
    source = "config.json and weight headers" if manifest and config else ("weight headers" if manifest else "config.json")
    return result, {"sha": revision.sha, "source": source}


def _repo_and_revision(target: str, revision: str | None) -> tuple[str, str | None]:
    """REPO or ORG/NAME@REV (then --revision may not say otherwise)."""
    from tracker.hub.remote_estimate import split_target

    repo, rev = split_target(target)
    if rev and revision and rev != revision:
        raise click.UsageError(f"{target} names revision {rev} and --revision {revision}: give one")
    return repo_arg(repo), rev or revision


def _watched(app: App, repo_id: str) -> bool:
    """Whether hubwatch stores a history of the repo (else it is read from the Hub)."""
    return app.store.read_model.repo_known(repo_id) or app.store.read_model.renamed_to(repo_id) is not None


def estimate_unwatched(app: App, repo_id: str, ref: str | None, seq_len_cap: int, lora_rank: int = 16,
                       lora_targets: str | tuple[str, ...] = "all-linear", **serving: Any
                       ) -> tuple[Estimate, dict[str, Any]]:
    """Estimate a repo hubwatch does not watch, at ``ref`` (a branch or a sha; default main), from its config.json
    and weight headers read from the Hub (tracker/hub/remote_estimate.py); nothing is stored."""
    from tracker.errors import HubError
    from tracker.hub.remote_estimate import load_unwatched

    try:
        loaded = load_unwatched(app.hub, repo_id, ref)
    except HubError as err:  # its class (and exit code) kept, the message saying where hubwatch looked first
        where = "read" if _watched(app, repo_id) else f"no stored revision of {repo_id} (not watched), and"
        err.args = (f"{where} from the Hub: {err}", *err.args[1:])
        raise
    where = f"{repo_id} at {loaded.sha[:12]}"
    if loaded.config is None and loaded.manifest is None:
        raise EstimateFailed(f"{where}: nothing to estimate from ({loaded.config_error}; "
                             + "; ".join(loaded.notes or ["no weight headers"]) + ")")
    try:
        result = estimate_model(loaded.config or {}, loaded.manifest, seq_len_cap=seq_len_cap, lora_rank=lora_rank,
                                lora_targets=lora_targets, **_serving_args(serving))
    except EstimateError as err:
        raise EstimateFailed(f"{where}: {err}", loaded.config) from err
    if loaded.config is not None:
        result.structure = structure_graph(loaded.config, seq_len_cap)
    result.notes.extend(loaded.notes)
    if loaded.config_error:
        result.notes.append(loaded.config_error)
    return result, {"sha": loaded.sha, "source": loaded.source, "ref": loaded.ref, "watched": False,
                    "weight_files": loaded.weight_files}
