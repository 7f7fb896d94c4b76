"""`hubwatch bom`: a CycloneDX 1.6 JSON bill of materials of model revisions, built with cyclonedx-python-lib.

Per model revision: a `machine-learning-model` component with its `pkg:huggingface/<org>/<name>@<sha>` purl;
inside it one `file` component per behaviour-deciding file (config, tokenizer, chat template, weights and
their index, custom code) with its sha256 (LFS files) or its git blob id (a `hubwatch:git-blob-id`
property: a blob id is not a hash of the file's bytes alone, so it is not claimed as one), custom-code files
marked; the loader packages the revision names (`transformers_version`, requirements.txt pins) as
`library` components with `pkg:pypi` purls it depends on; and as vulnerabilities, hubwatch's own OSV
records for the revision and the OSV advisories matched to its packages, with their ids.

Everything comes from the stored history (what `hubwatch outdated` ingests); the caller makes sure the
revision is stored.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from storage.front import Storage
from storage.kinds import model_purl
from storage.models import Revision
from tracker.pins.recorded_files import BEHAVIOUR_KINDS

CUSTOM_CODE = "custom_code"
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
    state_since: datetime | None = None
    moved_from: str | None = None  # a renamed repo: the name it had (its history moved from there)
    moved_to: str | None = None  # a renamed repo: the name it has now


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
    model.files = [
        {"path": f.path, "kind": f.kind, "oid": f.oid, "lfs_sha256": f.lfs_sha256, "size": f.size}
        for f in store.history.revision_files(revision.id) if f.kind in BEHAVIOUR_KINDS
    ]
    facts = store.advisories.facts([revision.id]).get(revision.id)
    for dep in ((facts.facts or {}).get("dependencies") or []) if facts else []:
        model.packages.append((str(dep["package"]), str(dep["version"]), ", ".join(dep.get("sources") or [])))
    ancestors = _ancestors(store, revision)
    for own in store.advisories.own(revision.repo_id):
        if own.sha in ancestors and own.fixed_sha not in ancestors and not own.record.get("withdrawn"):
            model.own.append(own.record)
    for link in store.advisories.links(revision.id):
        if link.status == "affected":
            model.osv.append((link.advisory_key, link.package, link.version, list(link.ids or [])))
    return model


def _ancestors(store: Storage, revision: Revision) -> set[str]:
    """The revision's sha and its stored ancestors' (following parents through the stored history)."""
    by_sha = {r.sha: r for r in store.history.list_revisions(revision.repo_id)}
    seen: set[str] = set()
    sha: str | None = revision.sha
    while sha is not None and sha not in seen and sha in by_sha:
        seen.add(sha)
        sha = by_sha[sha].parent_sha
    return seen


def render_bom(models: list[BomModel], hub_url: str, created_at: datetime, version: str) -> str:
    """The CycloneDX 1.6 JSON document of `models`."""
    from cyclonedx.model import ExternalReference, ExternalReferenceType, HashAlgorithm, HashType, Property, XsUri
    from cyclonedx.model.bom import Bom
    from cyclonedx.model.component import Component, ComponentType
    from cyclonedx.model.tool import Tool
    from cyclonedx.model.vulnerability import (
        BomTarget,
        Vulnerability,
        VulnerabilityRating,
        VulnerabilitySeverity,
        VulnerabilitySource,
    )
    from cyclonedx.output.json import JsonV1Dot6
    from packageurl import PackageURL

    bom = Bom()
    bom.metadata.timestamp = created_at
    bom.metadata.tools.tools.add(Tool(vendor="hubwatch", name="hubwatch", version=version))
    libraries: dict[tuple[str, str], Component] = {}
    for model in models:
        org, _, name = model.repo_id.partition("/")
        purl = model_purl(model.repo_id, model.sha)
        component = Component(
            type=ComponentType.MACHINE_LEARNING_MODEL, group=org, name=name, version=model.sha,
            purl=PackageURL.from_string(purl), bom_ref=purl,
            external_references=[ExternalReference(type=ExternalReferenceType.DISTRIBUTION,
                                                   url=XsUri(f"{hub_url.rstrip('/')}/{model.repo_id}/tree/{model.sha}"))],
            properties=[Property(name="hubwatch:branch", value=model.branch)],
        )
        if model.repo_state != "active":  # gone, disabled, moved...: a dependency that may not load any more
            component.properties.add(Property(name="hubwatch:repo-state", value=model.repo_state))
            if model.state_since is not None:
                component.properties.add(Property(name="hubwatch:repo-state-since", value=model.state_since.isoformat()))
        for key, value in (("hubwatch:moved-from", model.moved_from), ("hubwatch:moved-to", model.moved_to)):
            if value:
                component.properties.add(Property(name=key, value=value))
        for f in sorted(model.files, key=lambda f: f["path"]):
            properties = [Property(name="hubwatch:kind", value=f["kind"]), Property(name="hubwatch:git-blob-id", value=f["oid"])]
            if f["kind"] == CUSTOM_CODE:
                properties.append(Property(name="hubwatch:custom-code", value="true"))
            hashes = [HashType(alg=HashAlgorithm.SHA_256, content=f["lfs_sha256"])] if f["lfs_sha256"] else []
            component.components.add(Component(
                type=ComponentType.FILE, name=f["path"], version=f["oid"], hashes=hashes, properties=properties,
                bom_ref=f"{purl}#{f['path']}",
            ))
        bom.components.add(component)
        needs = []
        for package, version, where in model.packages:
            key = (package.lower(), version)
            if key not in libraries:
                pypi = PackageURL(type="pypi", name=package.lower(), version=_exact(version))
                libraries[key] = Component(type=ComponentType.LIBRARY, name=package, version=version, purl=pypi,
                                           bom_ref=f"{pypi.to_string()}#{version}",
                                           properties=[Property(name="hubwatch:named-by", value=where[:500])])
                bom.components.add(libraries[key])
            needs.append(libraries[key])
        bom.register_dependency(component, needs)
        for record in model.own:
            ours = (record.get("database_specific") or {}).get("hubwatch") or {}
            severity = SEVERITIES.get(str(ours.get("severity")), "unknown")
            bom.vulnerabilities.add(Vulnerability(
                bom_ref=f"{record['id']}@{purl}", id=str(record["id"]),
                source=VulnerabilitySource(name="hubwatch"), description=str(record.get("summary", "")),
                detail=str(record.get("details", ""))[:4000],
                ratings=[VulnerabilityRating(severity=VulnerabilitySeverity(severity), method=None)],
                affects=[BomTarget(ref=purl)],
            ))
        for key, package, version, ids in model.osv:
            target = libraries.get((package.lower(), version))
            aliases = f" (aliases: {', '.join(ids)})" if ids else ""
            bom.vulnerabilities.add(Vulnerability(
                bom_ref=f"{key}@{purl}#{package}", id=key,
                source=VulnerabilitySource(name="OSV", url=XsUri(f"https://osv.dev/vulnerability/{key}")),
                description=f"{package} {version} named by {model.repo_id}@{model.sha[:12]}{aliases}",
                affects=[BomTarget(ref=target.bom_ref.value if target else purl)],  # type: ignore[union-attr]
            ))
    return JsonV1Dot6(bom).output_as_string(indent=2)


def _exact(version: str) -> str | None:
    """A version a purl may carry: as written when it is one version (`4.40.0`), else none (`>=4.30`)."""
    stripped = version.strip().removeprefix("==")
    return stripped if stripped and all(ch.isalnum() or ch in ".+-_!" for ch in stripped) else None
