# supervisor: filled in by its issue.
