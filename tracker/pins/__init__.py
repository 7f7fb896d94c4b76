"""Pins: the revisions a user runs, and what changed upstream since.

cache.py reads pins from the local Hugging Face cache; lockfile.py reads and writes hubwatch's TOML lock
file; recorded_files.py picks the files a lock entry records; outdated.py checks pins against their branch
heads through the ingestor and the stored history.
"""
