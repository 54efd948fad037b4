"""Retrieval evaluation: metrics, case loaders (JSONL, BEIR) and the runner behind `ragstead eval`."""
