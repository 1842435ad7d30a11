# proto: filled in by its issue.
