"""What the index runs recorded about secrets (`secrets.json` beside the index lock: per file how many were masked,
whether the whole index went through the secrets pass, by which detector). Read by `status` without loading the
index run (build.py writes it)."""

from __future__ import annotations

import json
from typing import Any

from ragstead.documents.secrets import DETECTOR_VERSION
from ragstead.indexing.options import IndexingOptions

SECRETS_FILE = "secrets.json"


def secret_counts(options: IndexingOptions) -> dict[str, int]:
    """Indexed files that hold secrets -> how many (masked in the index), as the index runs recorded them."""
    return {str(k): int(v) for k, v in secrets_record(options).get("files", {}).items()}


def secrets_checked(options: IndexingOptions) -> bool | None:
    """Whether every document of the index went through the secrets pass: false for an index built before it
    (its chunks keep what they held until `ragstead index --rebuild`); None (unknown) for one imported from a
    snapshot that does not say."""
    record = secrets_record(options)
    complete = record.get("complete", False)
    return None if complete is None else bool(complete)


def secrets_imported(options: IndexingOptions) -> bool:
    """Whether the index's secrets state came with an imported snapshot (so its files are elsewhere)."""
    return bool(secrets_record(options).get("imported"))


def secrets_record(options: IndexingOptions) -> dict[str, Any]:
    """The record as it stands: {"complete", "files"}, and "imported" after an import."""
    try:
        data = json.loads((options.lock_file.parent / SECRETS_FILE).read_text(encoding="utf-8"))
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def secrets_detector(options: IndexingOptions) -> int:
    """The version of the detector that masked the index (documents/secrets.py DETECTOR_VERSION; 1: before it
    was kept). An older one than this ragstead's is told once by `status` and `index`: `index --remask` applies it."""
    record = secrets_record(options)
    return int(record.get("detector", 1)) if record else DETECTOR_VERSION
