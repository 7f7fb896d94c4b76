"""An own record as the OSV API and the offline database serve it.

The advisory check stores each of hubwatch's findings as an OSV record (tracker/advisories/own.py: id
`x_HUBWATCH-...`, a GIT range on the repo's Hub URL from the introducing commit, `fixed` once what it is about
is gone). Served, the record gains what a consumer of osv.dev's API looks for: the model's package URL on its
package, the finding's kind and severity at the top of `database_specific`, the revision's page among its
references, and as `related` the upstream OSV advisories that affect the loaders that revision needs (their
ids and aliases as OSV links them), listed in `database_specific.hubwatch.loader_advisories` with the package
and version each concerns. The stored record itself is never changed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

from storage.kinds import model_purl, repo_type_of
from storage.models import AdvisoryLink
from storage.osv_index import StoredOwn

SCHEMA_VERSION = "1.7.0"  # the version whose GIT ecosystem and `related` the records use
MAX_LOADER_ADVISORIES = 50
SHA_RE = re.compile(r"^[0-9a-fA-F]{40}$")


def served_record(own: StoredOwn, upstream: Iterable[AdvisoryLink] = (), pages_url: str | None = None) -> dict[str, Any]:
    """The OSV record of one own finding; `upstream`: the relevant, affecting links of its introducing revision;
    `pages_url`: this server's base URL (without it, no link to the revision's page)."""
    record: dict[str, Any] = dict(own.record)  # the parts changed below are copied, the rest shared
    record.setdefault("schema_version", SCHEMA_VERSION)
    record["affected"] = [_with_purl(a, own.repo_id) for a in record.get("affected") or ()]
    links = sorted(upstream, key=lambda lk: (lk.advisory_key, lk.package))
    related = {str(i) for lk in links for i in (lk.ids or [lk.advisory_key])} - {record["id"]}
    if related:
        record["related"] = sorted(set(record.get("related") or ()) | related)
    references = record["references"] = list(record.get("references") or ())
    if pages_url:
        for sha in dict.fromkeys(s for s in (own.sha, own.fixed_sha) if s):
            page = {"type": "WEB", "url": f"{pages_url.rstrip('/')}/repos/{own.repo_id}/revisions/{sha}"}
            if page not in references:
                references.append(page)
    specific = record.get("database_specific") or {}
    ours = dict(specific.get("hubwatch") or {})
    ours["purl"] = _purl(own.repo_id, own.sha)
    if links:
        ours["loader_advisories"] = [
            {"id": lk.advisory_key, "aliases": [i for i in lk.ids if i != lk.advisory_key], "package": lk.package,
             "version": lk.version, "verdict": lk.verdict, "summary": lk.summary}
            for lk in links[:MAX_LOADER_ADVISORIES]
        ]
    record["database_specific"] = {**specific, "kind": own.class_id, "severity": own.severity, "hubwatch": ours}
    return record


def _with_purl(affected: dict[str, Any], repo_id: str) -> dict[str, Any]:
    package = affected.get("package")
    if not isinstance(package, dict) or package.get("ecosystem") != "GIT" or "purl" in package:
        return affected
    if repo_type_of(repo_id) == "dataset":  # no purl type names a dataset: its GIT package's name is its URL
        return affected
    return {**affected, "package": {**package, "purl": _purl(repo_id)}}


def _purl(repo_id: str, sha: str | None = None) -> str:
    """model_purl's answer; a full hex sha, which a purl version carries as it is, appended to the repo's purl
    (made once per repo) rather than the whole purl built again per record."""
    if sha is None:
        return _repo_purl(repo_id)
    if SHA_RE.match(sha):
        return f"{_repo_purl(repo_id)}@{sha.lower()}"
    return model_purl(repo_id, sha)


@lru_cache(maxsize=4096)
def _repo_purl(repo_id: str) -> str:
    return model_purl(repo_id)
