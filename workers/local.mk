# workers: filled in by its issue.
