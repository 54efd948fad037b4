import pytest

from ragstead.retrieval.fusion import reciprocal_rank_fusion
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
