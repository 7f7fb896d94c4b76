"""What people read: HTML pages (pages.py, templates/), RSS/Atom feeds (feed.py), and the view models,
prompt diffs, charts and text clean-up both render from."""
