"""Auto-tags for an ingested source.

With an LLM provider configured, the first 5,000 characters and the knowledge base's existing tags go to the
provider chain, which must return JSON `{"tags": [...], "new_tags": [...], "reasoning": "..."}`; the reply is
validated (known keys, short slug-like tags, at most MAX_TAGS). Without a provider, or on a reply that does
not validate, a local tagger runs: existing tags ranked by embedding similarity to the text, plus keyphrases
(YAKE) re-ranked KeyBERT-style by similarity with the same embedder, each kept above its threshold
(docs/ingest.md, "Auto-tags", has the measurement behind them).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ragstead.answer.base import AnswerProvider, Context, ProviderError
from ragstead.core import egress
from ragstead.documents.secrets import mask_secrets
from ragstead.embeddings.base import Embedder

TAGGING_CHARS = 5000
MAX_TAGS = 5
# Cosine of a tag (as a query) to the text (as passages) from which an existing tag applies and a keyphrase is
# kept: a bar on precision (#47.12). Chosen on the fit half of a folder's labelled notes (tests/data/tagging,
# `python -m bench tagging`): the pair whose offered tags a person accepts >= 80 % of the time there and that
# offers the most accepted tags. Held-out half: precision 0.60 -> 0.86 against the former 0.225 / 0.425 (chosen
# for F1 on web pages), 4.2 -> 1.8 tags offered a note. docs/benchmarks.md, "Auto-tags".
EXISTING_TAG_MIN = 0.325
KEYPHRASE_MIN = 0.575
MAX_KEYPHRASES = 3
_TAG = re.compile(r"^[a-z0-9][a-z0-9 ._+#-]{0,38}[a-z0-9+#]$|^[a-z0-9]$")

PROMPT = (
    "Tag this document for a personal knowledge base. Reply with JSON only, no prose: "
    '{"tags": [existing tags that apply], "new_tags": [at most 3 new short lowercase topic tags], '
    '"reasoning": "one sentence"}. Prefer existing tags. Existing tags: '
)


@dataclass
class Tagging:
    tags: list[str]
    method: str  # llm | local | none
    reasoning: str | None = None
    fallback: str | None = None  # why the LLM's reply was not used
    candidates: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"tags": self.tags, "method": self.method, "reasoning": self.reasoning, "fallback": self.fallback}


def normalize_tag(tag: str) -> str | None:
    """A tag as the index keeps it: lower case, single spaces as '-', slug-like, 1-40 characters."""
    text = "-".join(str(tag).lower().split())
    return text if _TAG.match(text) else None


def parse_llm_tags(reply: str, existing: Sequence[str]) -> tuple[list[str], str | None]:
    """Validate a provider's JSON reply. Returns (tags, reasoning); ValueError on anything malformed."""
    text = reply.strip()
    if text.startswith("```"):  # a fenced reply: take the fenced part
        text = text.strip("`").removeprefix("json").strip()
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        raise ValueError("no JSON object in the reply")
    data = json.loads(text[start : end + 1])
    if not isinstance(data, dict) or not isinstance(data.get("tags", []), list) \
            or not isinstance(data.get("new_tags", []), list):
        raise ValueError("the reply is not {tags: [...], new_tags: [...]}")
    known = set(existing)
    chosen = [t for t in (normalize_tag(x) for x in data.get("tags", []) if isinstance(x, str)) if t in known]
    new = [t for t in (normalize_tag(x) for x in data.get("new_tags", []) if isinstance(x, str)) if t][:3]
    tags = list(dict.fromkeys([*chosen, *new]))[:MAX_TAGS]
    reasoning = data.get("reasoning")
    return tags, str(reasoning)[:500] if isinstance(reasoning, str) else None


def llm_tags(text: str, existing: Sequence[str],
             providers: Sequence[AnswerProvider]) -> tuple[Tagging | None, str | None]:
    """Ask the provider chain; (Tagging, None) from the first valid reply, else (None, why)."""
    why = None
    # The excerpt a model reads has its secrets masked, as every chunk of the index has.
    context = Context(1, mask_secrets(text[:TAGGING_CHARS]), "document",
                      {"page": None, "section_path": None, "heading": None, "chunk_id": "tagging"}, 1.0)
    for provider in providers:
        try:
            with egress.purpose(f"llm tagging: {provider.name}"):
                reply = provider.answer(PROMPT + json.dumps(list(existing)[:200]), [context])
            tags, reasoning = parse_llm_tags(reply, existing)
        except ProviderError as exc:
            why = f"{provider.name}: {exc}"
            continue
        except (ValueError, TypeError) as exc:
            why = f"{provider.name}: bad JSON ({str(exc)[:120]})"
            continue
        return Tagging(tags, "llm", reasoning), None
    return None, why


def _keyphrases(text: str, limit: int = 10) -> list[str]:
    import yake

    extractor = yake.KeywordExtractor(lan="en", n=2, top=limit, dedup_lim=0.7)
    phrases = []
    for phrase, _score in extractor.extract_keywords(text):
        tag = normalize_tag(phrase)
        if tag and len(tag) >= 3 and not tag.isdigit():
            phrases.append(tag)
    return list(dict.fromkeys(phrases))


def local_tags(text: str, existing: Sequence[str], embedder: Embedder, *, existing_min: float = EXISTING_TAG_MIN,
               keyphrase_min: float = KEYPHRASE_MIN) -> Tagging:
    """Existing tags by similarity, then keyphrases KeyBERT-style, each above its threshold."""
    sample = " ".join(text[:TAGGING_CHARS].split())
    if not sample:
        return Tagging([], "none")
    passages = embedder.embed_documents([sample[i : i + 1200] for i in range(0, len(sample), 1200)][:4])
    doc = passages.mean(axis=0)
    doc = doc / (np.linalg.norm(doc) or 1.0)
    candidates: list[dict[str, Any]] = []
    labels = [t for t in existing if normalize_tag(t)][:500]
    if labels:
        for tag, score in zip(labels, _similarities(embedder, labels, doc), strict=True):
            candidates.append({"tag": tag, "score": round(float(score), 4), "kind": "existing"})
    phrases = [p for p in _keyphrases(sample) if p not in set(labels)]
    if phrases:
        for tag, score in zip(phrases, _similarities(embedder, [p.replace("-", " ") for p in phrases], doc),
                              strict=True):
            candidates.append({"tag": tag, "score": round(float(score), 4), "kind": "keyphrase"})
    return Tagging(choose_tags(candidates, existing_min, keyphrase_min), "local", candidates=candidates)


def choose_tags(candidates: Sequence[dict[str, Any]], existing_min: float = EXISTING_TAG_MIN,
                keyphrase_min: float = KEYPHRASE_MIN) -> list[str]:
    """The tags offered from scored candidates: existing tags first, then at most MAX_KEYPHRASES keyphrases,
    each at or above its kind's threshold, best first, at most MAX_TAGS in all."""
    kept = sorted((c for c in candidates if c["score"] >= (existing_min if c["kind"] == "existing" else keyphrase_min)),
                  key=lambda c: (c["kind"] != "existing", -c["score"]))
    tags, phrases_kept = [], 0
    for candidate in kept:
        if candidate["kind"] == "keyphrase":
            if phrases_kept >= MAX_KEYPHRASES:
                continue
            phrases_kept += 1
        tags.append(candidate["tag"])
    return tags[:MAX_TAGS]


def _similarities(embedder: Embedder, labels: list[str], doc: np.ndarray) -> np.ndarray:
    vectors = np.vstack([embedder.embed_query(label) for label in labels])
    return vectors @ doc


def auto_tags(text: str, existing: Sequence[str], embedder: Embedder | None,
              providers: Sequence[AnswerProvider]) -> Tagging:
    """The LLM chain when there is one, else (or when its reply does not validate) the local tagger."""
    fallback = None
    if providers:
        tagging, fallback = llm_tags(text, existing, providers)
        if tagging is not None:
            return tagging
    if embedder is None:
        return Tagging([], "none", fallback=fallback)
    tagging = local_tags(text, existing, embedder)
    tagging.fallback = fallback
    return tagging
