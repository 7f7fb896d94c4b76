"""hubwatch's findings as an OSV database: the records (records.py), osv.dev's query language and page tokens
(queries.py), the answers to queries (database.py; which records hold a commit is matched in SQL by
storage/osv_index.py) and the offline database, osv.dev's per-ecosystem `all.zip` with its `modified_id.csv`
(archive.py). The HTTP routes are feeds/http/osv_api.py; the `advisories export --osv-zip` command lives in the CLI."""
