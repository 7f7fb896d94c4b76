"""What the tests share besides fixtures: servers and databases to test against, the `hubwatch` CLI (in-process,
or in a subprocess), fake clocks, waits with a deadline, and the multi-process scenarios the benchmarks also run.

Test modules import from here (`from tests.support.cli import run_cli`); the conftest.py files hold only
fixtures and hooks, built from these helpers.
"""
