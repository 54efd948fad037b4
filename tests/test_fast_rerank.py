"""The fast sentence re-ranker: a per-query budget of model calls chosen by shared question terms, sentence vectors
cached across queries by sentence hash, and the same scores as the exhaustive re-ranker where nothing is cut."""

from __future__ import annotations

import numpy as np
import pytest

from helpers.project import CountingEmbedder
from ragstead.retrieval.rerank import SentenceMaxSimReranker
from ragstead.retrieval.sentences import split_sentences

QUESTION = "Which database did we migrate the billing service to?"
TEXTS = [
    "The office plants are watered on Mondays by the facilities team. "
    "We migrated the billing service database to PostgreSQL 16 in March. "
    "The kitchen is cleaned on Fridays after the weekly lunch.",
    "Invoices go out monthly to every customer by email. "
    "The billing team reviews the costs of the database every quarter.",
    "The travel policy allows economy flights under six hours. Longer flights may be booked in premium economy.",
]


@pytest.fixture
def counted(real_embedder) -> CountingEmbedder:
    return CountingEmbedder(real_embedder)


def _exhaustive(embedder, question: str, texts: list[str]) -> list[float]:
    query = embedder.embed_query(question)
    return [float(np.max(embedder.embed_documents(split_sentences(t)) @ query)) for t in texts]


def test_without_a_budget_it_is_the_exhaustive_max_sim(counted: CountingEmbedder, real_embedder) -> None:
    reranker = SentenceMaxSimReranker(counted)
    scores = reranker.score(QUESTION, None, TEXTS)
    assert np.allclose(scores, _exhaustive(real_embedder, QUESTION, TEXTS), atol=1e-5)
    assert reranker.embedded == sum(len(split_sentences(t)) for t in TEXTS) == 7
    assert scores[0] == max(scores)  # the migration sentence is the best of all


def test_a_budget_embeds_the_sentences_sharing_most_question_terms_first(counted: CountingEmbedder,
                                                                         real_embedder) -> None:
    reranker = SentenceMaxSimReranker(counted, sentence_budget=3)
    scores = reranker.score(QUESTION, None, TEXTS)
    # Each candidate's best sentence first: the migration one (billing, service, database, migrated is not
    # "migrate"), the billing-database one, and the travel text's best; nothing else.
    assert reranker.embedded == 3 and len(counted.texts_embedded) == 3
    assert "We migrated the billing service database to PostgreSQL 16 in March." in counted.texts_embedded
    assert "The billing team reviews the costs of the database every quarter." in counted.texts_embedded
    exact = _exhaustive(real_embedder, QUESTION, TEXTS)
    assert np.allclose(scores[:2], exact[:2], atol=1e-5)  # their best sentences were the ones embedded


def test_sentence_vectors_are_cached_across_queries_and_texts(counted: CountingEmbedder) -> None:
    reranker = SentenceMaxSimReranker(counted, sentence_budget=2)
    first = reranker.score(QUESTION, None, TEXTS)
    assert reranker.embedded == 2
    # The same question again: the cached sentences cost nothing, and the budget fills in two more.
    second = reranker.score(QUESTION, None, TEXTS)
    assert reranker.embedded == 4 and second[0] >= first[0] - 1e-6
    # A new text made of sentences already seen embeds nothing new, whatever the budget.
    shared = split_sentences(TEXTS[0])[1] + " " + split_sentences(TEXTS[1])[1]
    before = reranker.embedded
    reranker.score("another question entirely", None, [shared])
    assert reranker.embedded == before


def test_a_candidate_without_an_embedded_sentence_gets_the_median(counted: CountingEmbedder) -> None:
    reranker = SentenceMaxSimReranker(counted, sentence_budget=2)
    scores = reranker.score(QUESTION, None, TEXTS)
    assert reranker.embedded == 2
    assert scores[2] == pytest.approx(float(np.median(scores[:2])))


def test_the_cache_is_bounded(counted: CountingEmbedder) -> None:
    reranker = SentenceMaxSimReranker(counted, cache_size=3)
    reranker.score(QUESTION, None, TEXTS)
    assert len(reranker._cache) == 3
    assert reranker.score(QUESTION, None, []) == []


def test_the_budget_comes_from_the_setting_and_a_bad_one_is_a_clear_error(tmp_path, fake_embedder) -> None:
    import ragstead
    from ragstead.errors import ConfigError

    with ragstead.open(tmp_path, embedder=fake_embedder, rerank_sentences=12) as kb:
        assert kb.reranker().sentence_budget == 12
    with ragstead.open(tmp_path, embedder=fake_embedder) as kb:
        assert kb.reranker().sentence_budget == 16  # the default (docs/benchmarks.md)
    with ragstead.open(tmp_path, embedder=fake_embedder, rerank_sentences=0) as kb:
        assert kb.reranker().sentence_budget is None  # 0: every sentence
    with pytest.raises(ConfigError, match="sentence budget must be 1 or more"):
        SentenceMaxSimReranker(fake_embedder, sentence_budget=-3)
