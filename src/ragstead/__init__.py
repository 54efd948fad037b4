"""ragstead: a local-first, private knowledge base with hybrid retrieval."""

__version__ = "0.1.0"
