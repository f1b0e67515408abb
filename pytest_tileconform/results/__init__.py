"""Results: the run report a session writes, and what reads it (merge, compare, fingerprints)."""
