"""`python -m bench tagging`: the thresholds of the local auto-tagger, measured on a labelled sample.

The sample: the 19 saved real pages of ../shared/fixtures/web, extracted as `ingest` extracts them, each
labelled by hand with the tags of VOCABULARY that apply (LABELS below; the vocabulary holds distractors no
page is about). For each (page, tag) pair the tagger's score is the cosine of the tag (as a query) to the
page's first 5,000 characters (as passages, averaged), with the packaged model.

- Existing tags: micro precision / recall / F1 of "score >= t" against the labels, swept over t. The
  threshold is chosen on one half of the pages (even positions) and reported on the other half (odd
  positions), then the other way round: it is never judged on the pages it was picked on.
- Keyphrases (YAKE, re-ranked by the same cosine): no labels exist for free-form phrases, so a kept phrase
  counts as right when one of its words (4+ letters) is in the page's title or labels. Reported: precision
  of the phrases kept and phrases per page, by threshold; the lowest threshold with precision >= 0.6 is
  chosen.
"""

from __future__ import annotations

from pathlib import Path

from bench.common import write_results

PAGES = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "web"
VOCABULARY = ["python", "programming", "web-development", "testing", "open-source", "licensing", "machine-learning",
              "statistics", "careers", "society", "social-media", "outage", "performance", "json", "politics",
              "climate", "energy", "ecology", "wildlife", "astronomy", "science", "video-games", "archaeology",
              "film", "awards", "hong-kong", "taiwan", "apple", "ios", "cooking", "health", "sports", "music",
              "travel", "finance", "real-estate", "fashion", "gardening"]
LABELS = {
    "blog.python.org.html": {"python", "programming", "open-source"},
    "boingboing.net.millenials.html": {"society"},
    "caktusgroup.com.django.html": {"python", "web-development", "testing", "programming"},
    "creativecommons.org.html": {"licensing", "open-source"},
    "en.wikipedia.org.tsne.html": {"machine-learning", "statistics"},
    "github.blog.spiceland.html": {"careers"},
    "gregoryszorc.com.python3.html": {"python", "programming", "open-source"},
    "kulu-media.com.meta-outage.html": {"social-media", "outage"},
    "lemire.me.json.html": {"json", "performance", "programming"},
    "mercurynews.com.2023.01.16.letters-1119.html": {"politics", "climate"},
    "nationalgeographic.co.uk.goats.html": {"ecology", "wildlife"},
    "nature.com.telescope.html": {"astronomy", "science"},
    "pcgamer.com.skyrim.html": {"video-games"},
    "phys.org.tool.html": {"archaeology", "science"},
    "pluralsight.com.python.html": {"python", "programming"},
    "reuters.com.parasite.html": {"film", "awards"},
    "salon.com.emissions.html": {"climate", "energy"},
    "scmp.com.playbook.html": {"politics", "hong-kong", "taiwan"},
    "theverge.com.ios13.html": {"apple", "ios"},
}
THRESHOLDS = [round(0.15 + 0.025 * i, 3) for i in range(19)]


def _prf(scored: list[tuple[float, bool]], threshold: float) -> tuple[float, float, float]:
    tp = sum(1 for s, gold in scored if s >= threshold and gold)
    fp = sum(1 for s, gold in scored if s >= threshold and not gold)
    fn = sum(1 for s, gold in scored if s < threshold and gold)
    p = tp / (tp + fp) if tp + fp else 0.0
    r = tp / (tp + fn) if tp + fn else 0.0
    return p, r, (2 * p * r / (p + r) if p + r else 0.0)


def _shipped_rows(existing: list[tuple[float, bool]], phrases: list[tuple[float, bool, int]]) -> list[list[str]]:
    """The thresholds shipped (a bar on precision over a folder's notes, bench/tagging_precision.py) on these pages."""
    from ragstead.ingest.tagging import EXISTING_TAG_MIN, KEYPHRASE_MIN

    p, r, f = _prf(existing, EXISTING_TAG_MIN)
    kept = [right for score, right, _ in phrases if score >= KEYPHRASE_MIN]
    precision, per_page = (sum(kept) / len(kept) if kept else 0.0), len(kept) / len(LABELS)
    return [[f"shipped: existing t={EXISTING_TAG_MIN}", f"P {p:.2f}", f"R {r:.2f}", f"F1 {f:.2f}"],
            [f"shipped: keyphrases t={KEYPHRASE_MIN}", f"P {precision:.2f}", f"{per_page:.1f} per page", ""]]


def main() -> None:
    import ragstead  # noqa: F401 - the package's model
    from ragstead.embeddings.catalog import embedder_for
    from ragstead.ingest.fetch import Fetched
    from ragstead.ingest.tagging import local_tags
    from ragstead.ingest.web import extract_html

    embedder = embedder_for("", None)
    pages, phrases = [], []
    for i, (name, labels) in enumerate(sorted(LABELS.items())):
        data = (PAGES / name).read_bytes()
        page = extract_html(Fetched(f"https://example.org/{name}", 200, "text/html", data), "u", "id")
        tagging = local_tags(page.text(), VOCABULARY, embedder, existing_min=-1.0, keyphrase_min=-1.0)
        scored = [(c["score"], c["tag"] in labels) for c in tagging.candidates if c["kind"] == "existing"]
        pages.append((i, scored))
        words = {w for w in (page.title or "").lower().replace("-", " ").split() if len(w) >= 4}
        words |= {w for label in labels for w in label.split("-")}
        for c in tagging.candidates:
            if c["kind"] == "keyphrase":
                phrases.append((c["score"], any(w in words for w in c["tag"].split("-") if len(w) >= 4), i))
    folds = {}
    for fit, held in ((0, 1), (1, 0)):
        fit_pairs = [p for i, s in pages if i % 2 == fit for p in s]
        held_pairs = [p for i, s in pages if i % 2 == held for p in s]
        best = max(THRESHOLDS, key=lambda t: (_prf(fit_pairs, t)[2], -t))
        folds[f"fit on {'even' if fit == 0 else 'odd'}"] = {"threshold": best, "fit": _prf(fit_pairs, best),
                                                            "held_out": _prf(held_pairs, best)}
    everything = [p for _, s in pages for p in s]
    rows = [["existing tags: threshold", "precision", "recall", "F1"]]
    for t in THRESHOLDS:
        p, r, f = _prf(everything, t)
        rows.append([f"{t:.3f}", f"{p:.2f}", f"{r:.2f}", f"{f:.2f}"])
    rows.append(["keyphrases: threshold", "precision", "kept per page", ""])
    phrase_rows = {}
    for t in THRESHOLDS:
        kept = [right for score, right, _ in phrases if score >= t]
        precision = sum(kept) / len(kept) if kept else 0.0
        phrase_rows[t] = (precision, len(kept) / len(LABELS))
        rows.append([f"{t:.3f}", f"{precision:.2f}", f"{len(kept) / len(LABELS):.1f}", ""])
    chosen_phrase = next((t for t in THRESHOLDS if phrase_rows[t][0] >= 0.6), THRESHOLDS[-1])
    for name, fold in folds.items():
        rows.append([f"{name}: t={fold['threshold']}", f"held-out P {fold['held_out'][0]:.2f}",
                     f"R {fold['held_out'][1]:.2f}", f"F1 {fold['held_out'][2]:.2f}"])
    rows.append([f"keyphrases chosen: t={chosen_phrase}", f"P {phrase_rows[chosen_phrase][0]:.2f}",
                 f"{phrase_rows[chosen_phrase][1]:.1f} per page", ""])
    rows += _shipped_rows(everything, phrases)
    write_results("tagging_threshold", {"model": embedder.name, "pages": len(LABELS), "vocabulary": VOCABULARY,
                                        "folds": folds, "keyphrase_threshold": chosen_phrase,
                                        "keyphrases": {str(t): v for t, v in phrase_rows.items()}}, rows)
