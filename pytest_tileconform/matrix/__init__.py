"""Matrix -> cases: the YAML format, loading it into cases, rewriting its expectations, shards."""
