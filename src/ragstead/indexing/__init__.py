"""Indexing: walk roots, diff against the manifest, embed only what changed, write atomically."""
