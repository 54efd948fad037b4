"""A document's language (#47.1), detected at index time with py3langid (langid.py's maintained fork: a naive Bayes
model over byte n-grams, BSD-3, numpy only, its 4.5 MB model in the wheel).

Kept to the languages a personal folder holds in practice: over all 97 of langid's, a short German receipt line read
as Luxembourgish ("Rechnung Nr. 4711 Summe 23,40 EUR" -> lb) and an IBAN as Aragonese. Text with too few letters
(a table of numbers, a photo's OCR noise) has no language: None, counted as unknown. The model loads once per
process (about a second), the first time a document is read; a run that changed nothing never loads it.
"""

from __future__ import annotations

import threading
from typing import Any

# The European languages, and the largest others, by ISO 639-1 code.
LANGUAGES = ("en", "de", "fr", "es", "it", "nl", "pt", "pl", "sv", "da", "no", "fi", "cs", "hu", "ro", "el", "tr",
             "ru", "uk", "ja", "zh", "ko", "ar", "hi")
NAMES = {"en": "English", "de": "German", "fr": "French", "es": "Spanish", "it": "Italian", "nl": "Dutch",
         "pt": "Portuguese", "pl": "Polish", "sv": "Swedish", "da": "Danish", "no": "Norwegian", "fi": "Finnish",
         "cs": "Czech", "hu": "Hungarian", "ro": "Romanian", "el": "Greek", "tr": "Turkish", "ru": "Russian",
         "uk": "Ukrainian", "ja": "Japanese", "zh": "Chinese", "ko": "Korean", "ar": "Arabic", "hi": "Hindi"}
MIN_LETTERS = 12  # fewer letters than a short sentence: no language
MIN_CONFIDENCE = 0.5  # below: no language (a list of names, mixed text)
SAMPLE_CHARS = 4000  # the start of a long document says its language as well as all of it

_lock = threading.Lock()
_identifier: Any = None


def _model() -> Any:
    global _identifier
    with _lock:
        if _identifier is None:
            from py3langid.langid import MODEL_FILE, LanguageIdentifier

            identifier = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
            identifier.set_languages(list(LANGUAGES))
            _identifier = identifier
        return _identifier


def detect_language(text: str) -> str | None:
    """The ISO 639-1 code of the text's language, or None: too little text, or no language clearly ahead. Never
    raises: without py3langid (an install without it), every text is None."""
    sample = text[:SAMPLE_CHARS]
    if sum(ch.isalpha() for ch in sample) < MIN_LETTERS:
        return None
    try:
        model = _model()
    except ImportError:
        return None
    with _lock:  # the identifier keeps no state between calls, but its numpy work is no faster in parallel
        code, confidence = model.classify(sample)
    return str(code) if confidence >= MIN_CONFIDENCE else None


def language_name(code: str) -> str:
    return NAMES.get(code, code)
