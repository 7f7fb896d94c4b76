"""The poll pipeline: what happens to one watch's new commits, oldest first: the snapshot read from the Hub
(`snapshot_io`), the differs run against the parent, the estimator rerun (`estimate_change`), the tokenizer
behaviour and template matrix kept (`behaviour_store`, `template_matrix`), the events composed (`events`), and
one write per revision (`ingest`)."""
