"""The plugin core at run time: the session's cases, pytest items, the recorder of verdicts."""
