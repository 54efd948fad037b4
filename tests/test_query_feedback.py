"""Rocchio query feedback in hybrid search: what the second vector pass searches with, what a hit reports,
where the feedback chunks may come from, and how bad knobs are refused."""

import numpy as np
import pytest

from ragstead.errors import InvalidQueryError
from ragstead.filters import QueryFilters
from ragstead.retrieval.fusion import convex_fusion
from ragstead.retrieval.lexical_query import query_terms
from ragstead.retrieval.search import SearchOptions, search

FILES = {
    "kb/users/alice/boiler.md": "The boiler in the basement was serviced in October; the pressure valve was replaced.",
    "kb/users/alice/heating.md": "Radiators upstairs stay cold when the heating pump stalls; bleed them each autumn.",
    "kb/users/alice/valve.md": "A spare pressure relief valve for the boiler is in the garage, top shelf.",
    "kb/users/alice/garden.md": "Tomatoes need staking by June and a feed of potash every two weeks.",
    "kb/users/alice/car.md": "The car's winter tyres are stored at the garage in town until November.",
    "kb/users/alice/tax.md": "The tax return is due on the last day of July; the receipts are in the blue folder.",
    "kb/users/bob/boiler.md": "Bob's flat has a combi boiler; the landlord services it every spring.",
}
QUESTION = "when was the boiler serviced"


@pytest.fixture
def project(make_project):
    project = make_project(FILES)
    project.index()
    return project


def run(project, options, **filters):
    return search(QUESTION, project.store, project.embedder, QueryFilters.build(**filters), options,
                  project.settings.path_rules)


def test_the_second_pass_searches_with_the_query_moved_toward_the_best_chunks(project):
    filters = QueryFilters.build(user_slug="alice")
    off = run(project, SearchOptions(feedback_k=0), user_slug="alice")
    on = run(project, SearchOptions(feedback_k=2, feedback_weight=0.5), user_slug="alice")
    # What feedback should do, step by step over the same store: the first pass's best two chunks' vectors,
    # the moved query, a second vector search, fused with the same lexical list.
    seeds = [hit.chunk_id for hit in off.hits[:2]]
    stored = project.store.chunk_vectors(seeds)
    question = project.embedder.embed_query(QUESTION)
    moved = question + 0.5 * np.mean([stored[c] for c in seeds], axis=0)
    vector = project.store.vector_search(moved / np.linalg.norm(moved), filters, 25)
    lexical = project.store.lexical_search(query_terms(QUESTION), filters, 25)
    fused = convex_fusion(vector, lexical, 0.5)
    assert [h.fused_score for h in on.hits] == [round(fused[r], 8) for r in sorted(fused, key=lambda r: -fused[r])]
    assert [h.vector_rank for h in on.hits] != [h.vector_rank for h in off.hits] or \
        [h.fused_score for h in on.hits] != [h.fused_score for h in off.hits]  # the second pass changed something
    assert on.params["feedback_k"] == 2 and on.params["feedback_weight"] == 0.5
    assert off.params["feedback_k"] == 0 and off.params["feedback_weight"] is None
    assert "feedback_ms" in on.timings_ms and "feedback_ms" not in off.timings_ms


def test_a_hit_reports_its_similarity_to_the_question_not_to_the_moved_query(project):
    out = run(project, SearchOptions(feedback_k=3, feedback_weight=2.0), user_slug="alice")
    question = project.embedder.embed_query(QUESTION)
    stored = project.store.chunk_vectors([hit.chunk_id for hit in out.hits])
    for hit in out.hits:
        if hit.vector_rank is not None:
            assert hit.vector_score == pytest.approx(float(stored[hit.chunk_id] @ question), abs=1e-5)
            assert hit.dense_distance == pytest.approx(1.0 - hit.vector_score, abs=1e-5)
    np.testing.assert_array_equal(out.query_vector, question)  # ask scores against the question, too


def test_feedback_chunks_come_only_from_rows_the_scope_admits(project):
    # Tamper with the index so that SQL admits alice's boiler notes for bob; the path backstop refuses them,
    # and feedback must not move bob's query toward them either.
    project.store._db.execute("UPDATE chunks SET user_slug = 'bob' WHERE file_path LIKE 'kb/users/alice/%'")
    asked: list[str] = []
    real = project.store.chunk_vectors

    def recording(chunk_ids):
        asked.extend(chunk_ids)
        return real(chunk_ids)

    project.store.chunk_vectors = recording
    out = run(project, SearchOptions(feedback_k=2), user_slug="bob")
    path_of = dict(project.store._db.execute("SELECT chunk_id, file_path FROM chunks"))
    paths = {path_of[chunk_id] for chunk_id in asked}
    assert asked, "feedback asked for no vectors"
    assert paths <= {"kb/users/bob/boiler.md"}
    assert {hit.file_path for hit in out.hits} == {"kb/users/bob/boiler.md"}


@pytest.mark.parametrize("mode", ["vector", "lexical"])
def test_single_side_modes_do_not_use_feedback(project, mode):
    out = run(project, SearchOptions(mode=mode, feedback_k=2), user_slug="alice")
    assert out.params["feedback_k"] is None and "feedback_ms" not in out.timings_ms


@pytest.mark.parametrize("options", [{"feedback_k": -1}, {"feedback_k": 21}, {"feedback_k": 1.5},
                                     {"feedback_weight": -0.1}, {"feedback_weight": 11.0}])
def test_bad_feedback_knobs_are_clear_errors(project, options):
    with pytest.raises(InvalidQueryError, match="feedback"):
        run(project, SearchOptions(**options), user_slug="alice")
