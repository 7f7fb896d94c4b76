"""Advisories: what is known to be dangerous about loading each revision of a watched repo.

facts.py (dependency facts of a snapshot) -> osv.py (the OSV API) -> records.py (aliases merged, ranges
evaluated) -> rules.py (repo-triggerable or runtime-only, as data) -> advice.py (loader advice) and
own.py (hubwatch's own OSV records for security-relevant changes) -> service.py (the glue, writing through
storage/advisories.py). fake.py is an OSV server for tests and the demo; cli.py the `advisories` commands.
"""
