"""The fast sentence re-ranker: a per-query budget of model calls chosen by shared question terms, sentence vectors
cached across queries by sentence hash or stored at index time (`sentence_vectors`), and the same scores as the
exhaustive re-ranker where nothing is cut."""

from __future__ import annotations

import json

import numpy as np
import pytest

from helpers.project import CountingEmbedder, write_files
from ragstead.config import load_settings
from ragstead.knowledge_base import KnowledgeBase
from ragstead.retrieval import rerank
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


NOTES = {f"notes/{i}.md": text for i, text in enumerate(TEXTS)}


def _kb(root, embedder, **settings):  # type: ignore[no-untyped-def]
    write_files(root, NOTES)
    (root / "ragstead.toml").write_text('[ragstead]\nowner = "sam"\nroots = ["notes"]\n')
    return KnowledgeBase(load_settings(root).with_overrides(**settings), embedder=embedder)


def _rerank_scores(kb: KnowledgeBase) -> dict[str, float]:
    return {hit.file_path: hit.rerank_score for hit in kb.search(QUESTION, user="sam", rerank=True, k=3).hits}


def test_stored_sentence_vectors_give_the_exhaustive_scores_with_no_model_run(tmp_path, counted) -> None:
    # The model path, every sentence embedded at query time: the reference.
    with _kb(tmp_path / "plain", counted, rerank_sentences=0) as plain:
        plain.index()
        reference = _rerank_scores(plain)
    # The same notes with sentence vectors stored at index time, and the default budget of 16.
    with _kb(tmp_path / "stored", counted, sentence_vectors=True) as kb:
        report = kb.index()
        assert report.sentence_vector_chunks == 3 and kb.stats()["sentence_vector_chunks"] == 3
        counted.reset()
        scores = _rerank_scores(kb)
        assert counted.texts_embedded == []  # the re-ranker read every sentence vector from the index
        assert scores.keys() == reference.keys()
        for path, score in scores.items():
            assert score == pytest.approx(reference[path], abs=1e-5)
        # An edited note: the next index run embeds its sentences only; the re-ranker still runs no model.
        (tmp_path / "stored/notes/2.md").write_text("The travel policy now allows trains only. No more flights.")
        counted.reset()
        again = kb.index()
        assert again.sentence_vector_chunks == 1 and again.to_dict()["sentence_vector_chunks"] == 1
        assert set(counted.texts_embedded) <= {"The travel policy now allows trains only. No more flights.",
                                              "The travel policy now allows trains only.", "No more flights."}
        counted.reset()
        _rerank_scores(kb)
        assert counted.texts_embedded == []


def test_vectors_that_do_not_fit_are_not_used(tmp_path, counted, real_embedder) -> None:
    with _kb(tmp_path, counted, sentence_vectors=True) as kb:
        kb.index()
        store = kb.store
        chunks = [(hit.chunk_id, hit.text) for hit in kb.search(QUESTION, user="sam", k=3).hits]
        # Another model's name: the stored vectors are not comparable with this re-ranker's question vector.
        other = SentenceMaxSimReranker(CountingEmbedder(real_embedder))
        other.embedder.name = "another-model"
        assert other.preload(store, chunks) == 0
        # A row whose sentence count no longer matches the chunk's (another splitter) is left to the model.
        first = chunks[0]
        matrix = store.sentence_vectors([first[0]])[first[0]]
        assert SentenceMaxSimReranker(counted).preload(store, [first]) == len(matrix)
        longer = first[1] + " And one more sentence is here."
        assert SentenceMaxSimReranker(counted).preload(store, [(first[0], longer)]) == 0


def test_an_interrupted_fill_keeps_what_it_stored_and_the_next_run_resumes(tmp_path, counted, monkeypatch) -> None:
    monkeypatch.setattr(rerank, "FILL_BATCH", 1)  # one chunk per transaction

    class Interrupting(CountingEmbedder):
        def embed_documents(self, texts: list[str]) -> np.ndarray:
            if self.document_calls == 1:
                raise KeyboardInterrupt
            return super().embed_documents(texts)

    with _kb(tmp_path, counted) as kb:
        kb.index()
        interrupting = Interrupting(counted.inner)
        with pytest.raises(KeyboardInterrupt):
            rerank.fill_sentence_vectors(kb.store, interrupting)
        assert kb.stats()["sentence_vector_chunks"] == 1 and kb.store.integrity_check() == "ok"
        assert rerank.fill_sentence_vectors(kb.store, counted) == 2
        assert kb.stats()["sentence_vector_chunks"] == 3


def test_index_sentence_vectors_fills_them_and_keeps_them_current(make_project, cli) -> None:
    project = make_project({f"kb/users/alice/{i}.md": text for i, text in enumerate(TEXTS)})
    first = json.loads(cli(project, "index", "--roots", "kb", "--sentence-vectors", "--json").stdout)
    assert first["sentence_vector_chunks"] == first["chunks_written"] == first["index"]["sentence_vector_chunks"] == 3
    assert "sentence_vectors = true" in (project.root / "ragstead.toml").read_text()
    (project.root / "kb/users/alice/new.md").write_text("The heron survey moves to May this year.")
    later = json.loads(cli(project, "index", "--roots", "kb", "--json").stdout)  # no flag: the config keeps it on
    assert later["sentence_vector_chunks"] == 1 and later["index"]["sentence_vector_chunks"] == 4
    assert "sentences    vectors for 4 of 4 chunks" in cli(project, "status").stdout
