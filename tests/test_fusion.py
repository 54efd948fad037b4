import pytest

from ragstead.retrieval.fusion import convex_fusion, min_max, min_max_above_zero, reciprocal_rank_fusion
from ragstead.retrieval.lexical_query import query_terms


def test_rrf_hand_computed():
    scores = reciprocal_rank_fusion([["a", "b", "c"], ["c", "a"]], k=60)
    assert scores["a"] == pytest.approx(1 / 61 + 1 / 62)
    assert scores["b"] == pytest.approx(1 / 62)
    assert scores["c"] == pytest.approx(1 / 63 + 1 / 61)
    assert max(scores, key=scores.get) == "a"


def test_rrf_k_zero_and_negative():
    assert reciprocal_rank_fusion([["x"]], k=0)["x"] == 1.0
    with pytest.raises(ValueError):
        reciprocal_rank_fusion([["x"]], k=-1)


def test_min_max_hand_computed():
    assert min_max([("a", 12.0), ("b", 7.0), ("c", 2.0)]) == {"a": 1.0, "b": 0.5, "c": 0.0}
    assert min_max([("a", 0.3), ("b", 0.3)]) == {"a": 1.0, "b": 1.0}  # a flat list counts as all-best
    assert min_max([]) == {}


def test_convex_fusion_hand_computed():
    # Each list is min-max scaled with its floor one mean gap below its worst score:
    vector = [("a", 0.9), ("b", 0.7), ("c", 0.5)]  # floor .5 - .4/3: a 1, b .625, c .25
    lexical = [("c", 20.0), ("d", 10.0), ("a", 5.0)]  # floor 5 - 15/3 = 0: c 1, d .5, a .25
    fused = convex_fusion(vector, lexical, weight=0.6)
    assert fused["a"] == pytest.approx(0.6 * 1.0 + 0.4 * 0.25)
    assert fused["b"] == pytest.approx(0.6 * 0.625)
    assert fused["c"] == pytest.approx(0.6 * 0.25 + 0.4 * 1.0)
    assert fused["d"] == pytest.approx(0.4 * 0.5)
    assert sorted(fused, key=fused.get, reverse=True) == ["a", "c", "b", "d"]
    # the weight's ends are the single lists
    assert sorted(convex_fusion(vector, lexical, 1.0).items(), key=lambda kv: -kv[1])[0][0] == "a"
    assert sorted(convex_fusion(vector, lexical, 0.0).items(), key=lambda kv: -kv[1])[0][0] == "c"
    with pytest.raises(ValueError):
        convex_fusion(vector, lexical, 1.5)


def test_the_last_candidate_of_a_list_still_scores_above_a_missing_one():
    fused = convex_fusion([("a", 0.9), ("b", 0.4)], [("a", 3.0), ("c", 1.0)], weight=0.5)
    assert fused["b"] > 0 and fused["c"] > 0
    assert min_max_above_zero([("x", 0.3), ("y", 0.3)]) == {"x": 1.0, "y": 1.0}
    assert min_max_above_zero([]) == {}


def test_convex_uses_score_margins_where_rrf_sees_only_ranks():
    # the vector side is sure about "a" (0.9 vs 0.2); the lexical side barely prefers "b" (10.1 vs 10.0)
    vector, lexical = [("a", 0.9), ("b", 0.2), ("c", 0.1)], [("b", 10.1), ("a", 10.0), ("c", 0.0)]
    rrf = reciprocal_rank_fusion([[i for i, _ in vector], [i for i, _ in lexical]], k=60)
    assert rrf["a"] == pytest.approx(rrf["b"])  # a tie: ranks cannot tell
    convex = convex_fusion(vector, lexical, 0.5)
    assert convex["a"] > convex["b"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("billing AND database", ["billing", "database"]),
        ('NEAR("a" "b") OR x*', ["near", "b", "x"]),
        ("to be or NOT to be", ["to", "be", "or", "not"]),  # only stop words: kept
        ("text:secret", ["text", "secret"]),
        ("'; DROP TABLE chunks; --", ["drop", "table", "chunks"]),
        ("*** () ^ \" - :", []),
        ("", []),
    ],
)
def test_query_terms_are_only_plain_words(text, expected):
    assert query_terms(text) == expected
