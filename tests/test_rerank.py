"""Second-stage re-ranking: the sentence max-sim re-ranker with the real model, and how search uses it."""

import pytest

from helpers.library import search
from ragstead.errors import InvalidQueryError
from ragstead.filters import QueryFilters
from ragstead.retrieval.rerank import SentenceMaxSimReranker
from ragstead.retrieval.search import SearchOptions

FILLER = " ".join(
    f"The office plants on floor {i} are watered on Mondays and the kitchen is cleaned on Fridays." for i in range(25)
)
FILES = {
    # The answer sits after ~400 tokens of filler: past the embedder's 256-token window, so the chunk
    # vector never sees it, but one of its sentences says it outright.
    "kb/users/alice/long.md": FILLER + " We migrated the billing database to PostgreSQL 16 in March.",
    "kb/users/alice/near.md": "Billing notes: invoices go out monthly and the billing team reviews the database "
                              "costs every quarter.",
    "kb/users/alice/far.md": "The travel policy allows economy flights under six hours.",
}
QUESTION = "Which database did we migrate billing to?"


def run(project, reranker=None, mode="vector", **options):
    return search(QUESTION, project.store, project.embedder, QueryFilters.build(user_slug="alice"),
                  SearchOptions(mode=mode, k=3, **options), project.settings.path_rules, reranker)


def test_the_reranker_lifts_a_chunk_whose_answer_the_chunk_vector_cannot_see(make_project):
    project = make_project(FILES)
    project.settings = project.settings.with_overrides(chunk_size=1000, overlap=0)  # one chunk per file
    project.index()
    before = run(project)
    assert [r["file_path"] for r in before["results"]] == [f"kb/users/alice/{n}.md" for n in ("near", "far", "long")]
    assert all(row["rerank_score"] is None for row in before["results"])
    reranker = SentenceMaxSimReranker(project.embedder)
    moved = run(project, reranker)  # default weight: the answer's chunk climbs past the unrelated one
    assert [r["file_path"] for r in moved["results"]] == [f"kb/users/alice/{n}.md" for n in ("near", "long", "far")]
    after = run(project, reranker, rerank_weight=3.0)  # a heavier second stage puts it first
    top = after["results"][0]
    assert top["file_path"] == "kb/users/alice/long.md" and top["final_rank"] == 1
    assert top["rerank_score"] > max(r["rerank_score"] for r in after["results"][1:])
    assert after["params"]["reranker"].startswith("sentence-maxsim:") and "rerank_ms" in after["timings_ms"]
    # same rows, re-ordered; nothing outside the scope appears
    assert {r["chunk_id"] for r in after["results"]} == {r["chunk_id"] for r in before["results"]}


def test_rerank_top_n_bounds_what_is_reordered_and_weight_zero_keeps_the_first_stage(make_project):
    project = make_project(FILES)
    project.settings = project.settings.with_overrides(chunk_size=1000, overlap=0)
    project.index()
    reranker = SentenceMaxSimReranker(project.embedder)
    first = [r["chunk_id"] for r in run(project)["results"]]
    assert [r["chunk_id"] for r in run(project, reranker, rerank_weight=0.0)["results"]] == first
    only_top = run(project, reranker, rerank_top_n=1)["results"]
    assert [r["chunk_id"] for r in only_top] == first and only_top[1]["rerank_score"] is None
    lexical = run(project, reranker, mode="lexical", rerank_weight=3.0)  # the reranker embeds the question itself
    assert lexical["results"][0]["file_path"] == "kb/users/alice/long.md"


def test_the_reranker_caches_sentence_vectors(make_project, embedder):
    reranker = SentenceMaxSimReranker(embedder, cache_size=3)  # sentence vectors: the three sentences below
    texts = ["Alpha beta gamma delta epsilon. Zeta eta theta iota kappa.", "One two three four five six."]
    embedder.reset()
    first = reranker.score("alpha", None, texts)
    calls = embedder.document_calls
    assert reranker.score("alpha", None, texts) == first and embedder.document_calls == calls
    reranker.score("alpha", None, ["Something else entirely, five words."])
    assert len(reranker._cache) == 3  # LRU bound


@pytest.mark.parametrize("bad", [{"fusion": "max"}, {"fusion_weight": 1.5}, {"rerank_top_n": 0},
                                 {"rerank_top_n": 500}, {"rerank_weight": -1.0}])
def test_bad_fusion_and_rerank_options_are_clear_errors(bad):
    with pytest.raises(InvalidQueryError):
        SearchOptions(**bad).validate()


def test_a_store_without_sentence_vectors_preloads_none_and_the_reranker_still_scores(embedder):
    class PluginStore:  # a plugin's store: documents and searches, no stored sentence vectors (#51.5)
        def embed_model(self) -> str:
            return embedder.name

    reranker = SentenceMaxSimReranker(embedder)
    text = "The boiler was serviced in March. The invoice came to 240 euros."
    assert reranker.preload(PluginStore(), [("c1", text)]) == 0  # type: ignore[arg-type]
    scores = reranker.score("what did the boiler service cost", None, [text, "Tulips flower in spring."])
    assert scores[0] > scores[1] and reranker.embedded > 0
