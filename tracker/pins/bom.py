"""`hubwatch bom`: a CycloneDX 1.6 JSON bill of materials of model revisions, built with cyclonedx-python-lib.

Per model revision: a `machine-learning-model` component with its `pkg:huggingface/<org>/<name>@<sha>` purl, its
licence (the card's), its base model as pedigree (ancestors) and the derivatives hubwatch follows of it
(descendants), and a `modelCard` (the library has none: written into the document after it, as the 1.6 schema
defines it) with the architecture, the task, the datasets the card names, and as properties the chat template's
sha256 (its text with `with_template`), the special tokens with their ids, and the stop-token set as a whole and per
runtime. Inside it one `file` component per behaviour-deciding file (config, tokenizer, chat template, weights and
their index, custom code) with its sha256 (LFS files) or its git blob id (a `hubwatch:git-blob-id` property: a blob
id is not a hash of the file's bytes alone, so it is not claimed as one), custom-code files marked, weight files
with their format and a pickle's verdict; the loader packages the revision names (`transformers_version`,
requirements.txt pins) as `library` components with `pkg:pypi` purls it depends on.

Vulnerabilities (a VDR): every one of hubwatch's own OSV records about the repo, with an `analysis` for the listed
revision: `exploitable` when the revision descends from the commit that introduced it and not from its fix,
`resolved` when it descends from the fix, `not_affected` (justification `code_not_present`) when it precedes the
introduction; and the OSV advisories matched to the packages the revision names (`exploitable`: the named version
is in the affected range). `vex_only` leaves out the files, the libraries not named by an advisory, and the
model-card details: the vulnerabilities and what they affect.

A dataset revision (`datasets/ORG/NAME`) is a `data` component: no purl (the registered `huggingface` purl type
is "Hugging Face ML models", its namespace and name a model repository's: a dataset's purl would name the model of
the same name, or none), so its bom-ref is its tree's URL on the Hub and its external references are that tree
(distribution) and its page https://huggingface.co/datasets/ORG/NAME (website). Its licence is the card's as the
dataset summary read it, its data files are `file` components with their sha256, and its configs and splits (rows,
columns) are a CycloneDX 1.6 `data` entry of type `dataset` (written into the document after the library, like
the model card) and `hubwatch:rows:CONFIG/SPLIT` properties.

Everything comes from the stored history (what `hubwatch outdated` ingests); the caller makes sure the
revision is stored.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from storage.front import Storage
from storage.kinds import model_purl, split_repo_key
from storage.models import Revision
from tracker.pins.recorded_files import BEHAVIOUR_KINDS

CUSTOM_CODE = "custom_code"
MODEL_CARD = "README.md"
CONFIG = "config.json"
WEIGHT_FORMATS = {".safetensors": "safetensors", ".gguf": "gguf", ".onnx": "onnx", ".h5": "keras-h5",
                  ".keras": "keras", ".msgpack": "flax-msgpack", ".tflite": "tflite", ".mlmodel": "coreml"}
SEVERITIES = {"critical": "critical", "warning": "high", "notice": "medium", "info": "info"}


@dataclass
class BomModel:
    """One model revision as the BOM lists it, read from the stored history."""

    repo_id: str
    sha: str
    branch: str
    files: list[dict[str, Any]] = field(default_factory=list)  # path, kind, oid, lfs_sha256, size
    packages: list[tuple[str, str, str]] = field(default_factory=list)  # name, version, where
    own: list[dict[str, Any]] = field(default_factory=list)  # hubwatch's OSV records open at this revision
    osv: list[tuple[str, str, str, list[str]]] = field(default_factory=list)  # key, package, version, ids
    repo_state: str = "active"  # what the Hub did to the repo itself, as its watch last saw (storage/kinds.py REPO_STATES)
    # every own record of the repo with the revision's analysis: (record, state, detail)
    analysed: list[tuple[dict[str, Any], str, str]] = field(default_factory=list)
    licence: str | None = None  # the card's `license`
    base_models: list[str] = field(default_factory=list)  # the card's `base_model`
    derivatives: list[str] = field(default_factory=list)  # derivatives hubwatch follows of this repo
    card: dict[str, Any] = field(default_factory=dict)  # architecture, task, datasets
    template: tuple[str, str] | None = None  # (sha256, text) of the default chat template
    specials: dict[str, str] = field(default_factory=dict)  # "eos_token" -> "<|eot_id|> (128009)"
    stops: dict[str, list[int | str]] = field(default_factory=dict)  # "union" and each runtime -> ids
    scans: dict[str, dict[str, str]] = field(default_factory=dict)  # path -> {"format": ..., "verdict": ...}
    state_since: datetime | None = None
    moved_from: str | None = None  # a renamed repo: the name it had (its history moved from there)
    moved_to: str | None = None  # a renamed repo: the name it has now
    dataset: dict[str, Any] | None = None  # a dataset revision's stored summary (tracker/revision/dataset_summary.py)

    @property
    def is_dataset(self) -> bool:
        return split_repo_key(self.repo_id)[0] == "dataset"


def stored_model(store: Storage, revision: Revision) -> BomModel:
    """The BOM's view of a stored revision: its behaviour files, the packages it names, its findings."""
    assert revision.id is not None
    model = BomModel(revision.repo_id, revision.sha, revision.branch)
    watch = store.watches.get_watch(revision.repo_id, revision.branch)
    if watch is not None:
        model.repo_state, model.state_since = watch.repo_state or "active", watch.state_since
        detail = watch.state_detail or {}
        if model.repo_state == "moved":
            model.moved_from, model.moved_to = detail.get("moved_from"), detail.get("moved_to")
    if model.is_dataset:  # its data files, and the licence, configs and splits its stored summary says
        from tracker.pipeline.dataset_store import load_summary
        from tracker.revision.dataset_summary import is_data_file

        model.dataset = load_summary(store, revision.repo_id, revision.sha) or {}
        licence = model.dataset.get("licence")
        model.licence = licence if isinstance(licence, str) and licence.strip() else None
        listed = [f for f in store.history.revision_files(revision.id) if is_data_file(f.path)]
    else:
        listed = [f for f in store.history.revision_files(revision.id) if f.kind in BEHAVIOUR_KINDS]
    model.files = [{"path": f.path, "kind": "data" if model.is_dataset else f.kind, "oid": f.oid,
                    "lfs_sha256": f.lfs_sha256, "size": f.size} for f in listed]
    facts = store.advisories.facts([revision.id]).get(revision.id)
    for dep in ((facts.facts or {}).get("dependencies") or []) if facts else []:
        model.packages.append((str(dep["package"]), str(dep["version"]), ", ".join(dep.get("sources") or [])))
    ancestors = _ancestors(store, revision)
    for own in store.advisories.own(revision.repo_id):
        if own.record.get("withdrawn"):
            continue
        last = own.last_affected_sha
        past_last = last is not None and last in ancestors and last != revision.sha
        if own.sha in ancestors and own.fixed_sha not in ancestors and not past_last:
            model.own.append(own.record)
            model.analysed.append((own.record, "exploitable", f"{revision.sha[:12]} descends from {own.sha[:12]}, "
                                   "which introduced it" + (f"; fixed at {own.fixed_sha[:12]}" if own.fixed_sha else "")
                                   + (f"; {last[:12]} is the last commit it affects" if last else "")))
        elif own.fixed_sha is not None and own.fixed_sha in ancestors:
            model.analysed.append((own.record, "resolved", f"fixed at {own.fixed_sha[:12]}, an ancestor of "
                                   f"{revision.sha[:12]}"))
        elif past_last:
            model.analysed.append((own.record, "not_affected", f"{revision.sha[:12]} comes after {str(last)[:12]}, the last "
                                   "commit it affects (no fix is known: what it is about is no longer there as it was)"))
        else:
            model.analysed.append((own.record, "not_affected", f"{revision.sha[:12]} does not descend from "
                                   f"{own.sha[:12]}, which introduced it: what it is about is not in it"))
    if not model.is_dataset:
        _describe(store, revision, model)
    for link in store.advisories.links(revision.id):
        if link.status == "affected":
            model.osv.append((link.advisory_key, link.package, link.version, list(link.ids or [])))
    return model


def _describe(store: Storage, revision: Revision, model: BomModel) -> None:
    """What the revision's stored files say about it: the card's licence, base models and datasets, the config's
    architecture, the chat template, the special tokens and stop sets, the weight files' formats and verdicts."""
    from tracker.differs.chat_sources import effective_templates, special_tokens
    from tracker.differs.files import front_matter
    from tracker.differs.stop_tokens import TokenNames, by_runtime, stop_set, stop_sets
    from tracker.revision.stored import load_snapshot

    snapshot = load_snapshot(store, revision)
    card, _ = front_matter(snapshot.text(MODEL_CARD)) if MODEL_CARD in snapshot.contents else ({}, None)
    licence = card.get("license")
    model.licence = licence if isinstance(licence, str) and licence.strip() else None
    model.base_models = [b for b in _listed(card.get("base_model")) if "/" in b]
    config = snapshot.read_json(CONFIG)[0] if CONFIG in snapshot.files else None
    config = config if isinstance(config, dict) else {}
    architectures = _listed(config.get("architectures"))
    model.card = {k: v for k, v in {
        "architectureFamily": config.get("model_type") if isinstance(config.get("model_type"), str) else None,
        "modelArchitecture": architectures[0] if architectures else None,
        "task": card.get("pipeline_tag") if isinstance(card.get("pipeline_tag"), str) else None,
        "datasets": _listed(card.get("datasets"))[:50],
    }.items() if v}
    template = effective_templates(snapshot).get("default")
    if template is not None:
        model.template = (hashlib.sha256(template.text.encode("utf-8", "surrogatepass")).hexdigest(), template.text)
    names = TokenNames(snapshot)
    for key, text in sorted(special_tokens(snapshot).items()):
        token_id = names.id_of(text)
        model.specials[key] = f"{text} ({token_id})" if token_id is not None else text
    if any(p in snapshot.files for p in (CONFIG, "generation_config.json", "tokenizer_config.json")):
        model.stops = {"union": [t.id if t.id is not None else str(t.text) for t in stop_set(snapshot, names)],
                       **by_runtime(stop_sets(snapshot, names))}
    for path, scan in sorted(snapshot.scans.items()):
        verdict = scan.result.get("verdict") if scan.format == "pickle" else None
        model.scans[path] = {"format": scan.format, **({"verdict": str(verdict or "unreadable")}
                                                        if scan.format == "pickle" else {})}
    model.derivatives = sorted({d.repo_id for d in store.derivatives.derivatives(revision.repo_id)})


def _listed(value: Any) -> list[str]:
    """A card or config value that may be one string or a list of them, as strings."""
    if isinstance(value, str):
        return [value]
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _ancestors(store: Storage, revision: Revision) -> set[str]:
    """The revision's sha and its stored ancestors' (following parents through the stored history)."""
    by_sha = {r.sha: r for r in store.history.list_revisions(revision.repo_id)}
    seen: set[str] = set()
    sha: str | None = revision.sha
    while sha is not None and sha not in seen and sha in by_sha:
        seen.add(sha)
        sha = by_sha[sha].parent_sha
    return seen


def render_bom(models: list[BomModel], hub_url: str, created_at: datetime, version: str, with_template: bool = False,
               vex_only: bool = False) -> str:
    """The CycloneDX 1.6 JSON document of `models` (with `with_template`, the chat templates' text; with
    `vex_only`, the vulnerabilities and the components they affect, nothing else)."""
    from cyclonedx.model import ExternalReference, ExternalReferenceType, HashAlgorithm, HashType, Property, XsUri
    from cyclonedx.model.bom import Bom
    from cyclonedx.model.component import Component, ComponentType, Pedigree
    from cyclonedx.model.impact_analysis import ImpactAnalysisJustification, ImpactAnalysisResponse, ImpactAnalysisState
    from cyclonedx.model.license import DisjunctiveLicense
    from cyclonedx.model.tool import Tool
    from cyclonedx.model.vulnerability import (
        BomTarget,
        Vulnerability,
        VulnerabilityAnalysis,
        VulnerabilityRating,
        VulnerabilitySeverity,
        VulnerabilitySource,
    )
    from cyclonedx.output.json import JsonV1Dot6
    from cyclonedx.spdx import fixup_id
    from packageurl import PackageURL

    bom = Bom()
    bom.metadata.timestamp = created_at
    bom.metadata.tools.tools.add(Tool(vendor="hubwatch", name="hubwatch", version=version))
    libraries: dict[tuple[str, str], Component] = {}
    states = {"exploitable": ImpactAnalysisState.EXPLOITABLE, "resolved": ImpactAnalysisState.RESOLVED,
              "not_affected": ImpactAnalysisState.NOT_AFFECTED}
    cards: dict[str, dict[str, Any]] = {}

    def repo_component(repo_id: str) -> Component:
        org, _, name = repo_id.partition("/")
        purl = f"pkg:huggingface/{repo_id}"
        return Component(type=ComponentType.MACHINE_LEARNING_MODEL, group=org, name=name,
                         purl=PackageURL.from_string(purl), bom_ref=f"{purl}#pedigree")

    for model in models:
        org, _, name = split_repo_key(model.repo_id)[1].partition("/")
        tree = f"{hub_url.rstrip('/')}/{model.repo_id}/tree/{model.sha}"
        distribution = ExternalReference(type=ExternalReferenceType.DISTRIBUTION, url=XsUri(tree))
        if model.is_dataset:  # no purl type for Hub datasets (module docstring): its tree's URL is its reference
            purl = tree
            component = Component(
                type=ComponentType.DATA, group=org, name=name, version=model.sha, bom_ref=purl,
                external_references=[distribution, ExternalReference(
                    type=ExternalReferenceType.WEBSITE, url=XsUri(f"{hub_url.rstrip('/')}/{model.repo_id}"))],
                properties=[Property(name="hubwatch:branch", value=model.branch),
                            Property(name="hubwatch:repo-type", value="dataset")],
            )
        else:
            purl = model_purl(model.repo_id, model.sha)
            component = Component(
                type=ComponentType.MACHINE_LEARNING_MODEL, group=org, name=name, version=model.sha,
                purl=PackageURL.from_string(purl), bom_ref=purl, external_references=[distribution],
                properties=[Property(name="hubwatch:branch", value=model.branch)],
            )
        if model.repo_state != "active":  # gone, disabled, moved...: a dependency that may not load any more
            component.properties.add(Property(name="hubwatch:repo-state", value=model.repo_state))
            if model.state_since is not None:
                component.properties.add(Property(name="hubwatch:repo-state-since", value=model.state_since.isoformat()))
        for key, value in (("hubwatch:moved-from", model.moved_from), ("hubwatch:moved-to", model.moved_to)):
            if value:
                component.properties.add(Property(name=key, value=value))
        if not vex_only:
            if model.is_dataset:
                _describe_dataset(component, model, cards, purl)
            else:
                _describe_component(component, model, with_template, cards, purl)
            if model.licence:
                spdx = fixup_id(model.licence)
                component.licenses.add(DisjunctiveLicense(id=spdx) if spdx else DisjunctiveLicense(name=model.licence))
            if model.base_models or model.derivatives:
                component.pedigree = Pedigree(ancestors=[repo_component(b) for b in model.base_models],
                                              descendants=[repo_component(d) for d in model.derivatives])
        for f in sorted(model.files, key=lambda f: f["path"]) if not vex_only else ():
            properties = [Property(name="hubwatch:kind", value=f["kind"]), Property(name="hubwatch:git-blob-id", value=f["oid"])]
            if f["kind"] == CUSTOM_CODE:
                properties.append(Property(name="hubwatch:custom-code", value="true"))
            scan = model.scans.get(f["path"], {})
            fmt = scan.get("format") if scan.get("format") != "pickle" else "pickle"
            fmt = fmt or WEIGHT_FORMATS.get("." + f["path"].rsplit(".", 1)[-1].lower()) if f["kind"] == "weights" else fmt
            if fmt:
                properties.append(Property(name="hubwatch:format", value=fmt))
            if "verdict" in scan:
                properties.append(Property(name="hubwatch:pickle-verdict", value=scan["verdict"]))
            hashes = [HashType(alg=HashAlgorithm.SHA_256, content=f["lfs_sha256"])] if f["lfs_sha256"] else []
            component.components.add(Component(
                type=ComponentType.FILE, name=f["path"], version=f["oid"], hashes=hashes, properties=properties,
                bom_ref=f"{purl}#{f['path']}",
            ))
        bom.components.add(component)
        needs = []
        advised = {(package.lower(), version) for _, package, version, _ in model.osv}
        for package, version, where in model.packages:
            key = (package.lower(), version)
            if vex_only and key not in advised:
                continue
            if key not in libraries:
                pypi = PackageURL(type="pypi", name=package.lower(), version=_exact(version))
                libraries[key] = Component(type=ComponentType.LIBRARY, name=package, version=version, purl=pypi,
                                           bom_ref=f"{pypi.to_string()}#{version}",
                                           properties=[Property(name="hubwatch:named-by", value=where[:500])])
                bom.components.add(libraries[key])
            needs.append(libraries[key])
        bom.register_dependency(component, needs)
        for record, state, detail in model.analysed:
            ours = (record.get("database_specific") or {}).get("hubwatch") or {}
            severity = SEVERITIES.get(str(ours.get("severity")), "unknown")
            fixed = any("fixed" in event for a in record.get("affected") or () for r in a.get("ranges") or ()
                        for event in r.get("events") or ())
            analysis = VulnerabilityAnalysis(
                state=states[state], detail=detail,
                justification=ImpactAnalysisJustification.CODE_NOT_PRESENT if state == "not_affected" else None,
                responses=[ImpactAnalysisResponse.UPDATE if fixed else ImpactAnalysisResponse.CAN_NOT_FIX]
                if state == "exploitable" else None)
            bom.vulnerabilities.add(Vulnerability(
                bom_ref=f"{record['id']}@{purl}", id=str(record["id"]),
                source=VulnerabilitySource(name="hubwatch"), description=str(record.get("summary", "")),
                detail=str(record.get("details", ""))[:4000],
                ratings=[VulnerabilityRating(severity=VulnerabilitySeverity(severity), method=None)],
                analysis=analysis, affects=[BomTarget(ref=purl)],
            ))
        for key, package, version, ids in model.osv:
            target = libraries.get((package.lower(), version))
            aliases = f" (aliases: {', '.join(ids)})" if ids else ""
            bom.vulnerabilities.add(Vulnerability(
                bom_ref=f"{key}@{purl}#{package}", id=key,
                source=VulnerabilitySource(name="OSV", url=XsUri(f"https://osv.dev/vulnerability/{key}")),
                description=f"{package} {version} named by {model.repo_id}@{model.sha[:12]}{aliases}",
                analysis=VulnerabilityAnalysis(
                    state=ImpactAnalysisState.EXPLOITABLE, responses=[ImpactAnalysisResponse.UPDATE],
                    detail=f"{model.repo_id}@{model.sha[:12]} names {package} {version}, in the advisory's affected "
                           "range (read from the revision's files; whether a loader takes the vulnerable path is not judged)"),
                affects=[BomTarget(ref=target.bom_ref.value if target else purl)],  # type: ignore[union-attr]
            ))
    return _with_model_cards(JsonV1Dot6(bom).output_as_string(indent=2), cards)


def _describe_component(component: Any, model: BomModel, with_template: bool, cards: dict[str, dict[str, Any]],
                        purl: str) -> None:
    """The model card the library cannot write (kept in `cards` by bom-ref, put in by `_with_model_cards`)."""
    properties = []
    if model.template is not None:
        properties.append({"name": "hubwatch:chat-template-sha256", "value": model.template[0]})
        if with_template:
            properties.append({"name": "hubwatch:chat-template", "value": model.template[1]})
    properties += [{"name": f"hubwatch:special-token:{key}", "value": value} for key, value in model.specials.items()]
    properties += [{"name": f"hubwatch:stop-tokens:{runtime}", "value": json.dumps(ids)}
                   for runtime, ids in model.stops.items()]
    parameters: dict[str, Any] = {k: v for k, v in model.card.items() if k != "datasets"}
    if model.card.get("datasets"):
        parameters["datasets"] = [{"type": "dataset", "name": d} for d in model.card["datasets"]]
    card = {k: v for k, v in {"modelParameters": parameters, "properties": properties}.items() if v}
    if card:
        cards[purl] = card


MAX_SPLITS = 200  # configs x splits listed per dataset (a repo of thousands of configs is said, not listed whole)
MAX_COLUMNS = 500  # columns listed per split in the `data` entry (the rest counted)


def _describe_dataset(component: Any, model: BomModel, cards: dict[str, dict[str, Any]], ref: str) -> None:
    """A dataset's facts from its stored summary: the gate, a loading script, each config/split's rows as
    properties, and its CycloneDX 1.6 `data` entry (kept in `cards` by bom-ref, put in by `_with_model_cards`)."""
    from cyclonedx.model import Property

    summary = model.dataset or {}
    facts = {"hubwatch:gated": summary.get("gated"), "hubwatch:loading-script": summary.get("loading_script"),
             "hubwatch:script-only": "true" if summary.get("script_only") else None}
    if not summary:
        facts["hubwatch:dataset-summary"] = "none stored (ingested before dataset summaries)"
    for key, value in facts.items():
        if value is not None and value is not False:
            component.properties.add(Property(name=key, value=str(value)))
    splits = [(config, split, facts) for config, about in sorted((summary.get("configs") or {}).items())
              if isinstance(about, dict) for split, facts in sorted((about.get("splits") or {}).items())
              if isinstance(facts, dict)]
    contents = []
    for config, split, facts in splits[:MAX_SPLITS]:
        rows = facts.get("rows")
        value = str(rows) if isinstance(rows, int) else "unknown"
        component.properties.add(Property(name=f"hubwatch:rows:{config}/{split}", value=value))
        columns = facts.get("columns") if isinstance(facts.get("columns"), dict) else {}
        listed = dict(list(columns.items())[:MAX_COLUMNS])
        more = {"columns_not_listed": len(columns) - len(listed)} if len(columns) > len(listed) else {}
        contents.append({"name": f"hubwatch:split:{config}/{split}",
                         "value": json.dumps({"rows": rows, "columns": listed, **more}, sort_keys=True)})
    if len(splits) > MAX_SPLITS:
        component.properties.add(Property(name="hubwatch:splits-not-listed", value=str(len(splits) - MAX_SPLITS)))
    hub_id = split_repo_key(model.repo_id)[1]
    entry: dict[str, Any] = {"bom-ref": f"{ref}#data", "type": "dataset", "name": hub_id,
                             "contents": {"url": ref, **({"properties": contents} if contents else {})}}
    if summary.get("configs"):
        entry["description"] = (f"{hub_id}@{model.sha[:12]}: " + ", ".join(
            f"{config}/{split} {facts.get('rows') if isinstance(facts.get('rows'), int) else '?'} rows"
            for config, split, facts in splits[:20]) + (" ..." if len(splits) > 20 else ""))
    cards[ref] = {"data": [entry]}


def _with_model_cards(document: str, cards: dict[str, dict[str, Any]]) -> str:
    """The library's JSON with each model component's `modelCard` (CycloneDX 1.6 `component.modelCard`) and each
    dataset component's `data` (`component.data`)."""
    if not cards:
        return document
    data = json.loads(document)
    for component in data.get("components") or ():
        card = cards.get(component.get("bom-ref", ""))
        if card is not None and "data" in card:
            component["data"] = card["data"]
        elif card is not None:
            component["modelCard"] = {"bom-ref": f"{component['bom-ref']}#model-card", **card}
    return json.dumps(data, indent=2)


def _exact(version: str) -> str | None:
    """A version a purl may carry: as written when it is one version (`4.40.0`), else none (`>=4.30`)."""
    stripped = version.strip().removeprefix("==")
    return stripped if stripped and all(ch.isalnum() or ch in ".+-_!" for ch in stripped) else None
