"""What one revision is, in the types every room shares: a repo at one commit (`snapshot`), what a differ
reports of it (`changes`), which kind each file belongs to (`classify`), and its requirements.txt read
(`requirements`)."""
