"""Pins: the revisions a user runs, and what changed upstream since.

cache_scan.py reads the local Hugging Face cache (as hostile input) and cache.py turns it into pins;
lockfile.py reads and writes hubwatch's TOML lock file; recorded_files.py picks the files a lock entry
records; outdated.py checks pins against their branch heads through the ingestor and the stored history.
code_scan.py finds pins in a source tree (yaml_scan.py reads its YAML deployment files as YAML), with the
pin forms both share in pin_forms.py; code_write.py moves them in place.
"""
