"""Retrieval: one filter model, FTS query sanitising, fusion and the search pipeline."""
