"""Advisories: what is known to be dangerous about loading each revision of a watched repo.

facts.py (dependency facts of a snapshot; requirements.txt is read by tracker/revision/requirements.py) -> osv.py
(the OSV API) -> records.py (aliases merged, ranges evaluated) -> rules.py (repo-triggerable or
runtime-only, as data) -> advice.py (loader advice) and own.py (hubwatch's own OSV records for
security-relevant changes). lookup.py asks OSV and matches its answer to the facts; service.py checks a
revision being ingested and is the object the app holds; recheck.py checks stored revisions again;
report.py reads what was stored, for the CLI; export.py writes own records as an OSV directory. All of it
writes through storage/advisories.py; the advisory events are composed in events.py.
tracker/standins/osv.py is an OSV server for tests and the demo; the `advisories` commands live in the CLI.
"""
