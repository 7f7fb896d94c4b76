"""`python -m tracker` is the `hubwatch` command."""

from tracker.cli import main

main()
