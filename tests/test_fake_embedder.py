"""The test fake (helpers/fake_embedder.py) keeps the `Embedder` contract: deterministic across calls and
processes, unit rows of the right shape, and similar texts closer than unrelated ones."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from helpers.fake_embedder import HashingEmbedder
from ragstead import Embedder

TEXTS = [
    "The billing database moved to PostgreSQL in January.",
    "Bob's secret travel policy allows business class on every flight.",
    "Ünïcode wörds, digits 12 ETH, and_underscores",
    "a",
]


@pytest.fixture(scope="module")
def fake() -> HashingEmbedder:
    return HashingEmbedder()


def test_implements_the_embedder_protocol(fake):
    assert isinstance(fake, Embedder)
    assert fake.name == "test-hashing-384" and fake.dim == 384


def test_shapes_dtype_and_unit_length(fake):
    docs = fake.embed_documents(TEXTS)
    assert docs.shape == (len(TEXTS), 384) and docs.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(docs, axis=1), 1.0, atol=1e-6)
    query = fake.embed_query(TEXTS[0])
    assert query.shape == (384,) and query.dtype == np.float32
    np.testing.assert_allclose(query, docs[0])
    assert fake.embed_documents([]).shape == (0, 384)


@pytest.mark.parametrize("text", ["", "   ", "!?. --", "\n\t"])
def test_a_text_without_words_gets_a_fixed_unit_vector(fake, text):
    vector = fake.embed_query(text)
    assert not np.isnan(vector).any()
    np.testing.assert_array_equal(vector, np.eye(384, dtype=np.float32)[0])


def test_deterministic_across_calls_and_instances(fake):
    first = fake.embed_documents(TEXTS)
    np.testing.assert_array_equal(first, fake.embed_documents(TEXTS))
    np.testing.assert_array_equal(first, HashingEmbedder().embed_documents(TEXTS))
    assert not np.array_equal(first[0], first[1])


def test_deterministic_across_processes(fake):
    """Another interpreter, with another hash seed, computes the very same vectors (no salted `hash()`)."""
    code = ("import json, sys; from helpers.fake_embedder import HashingEmbedder; "
            "print(json.dumps(HashingEmbedder().embed_documents(json.loads(sys.argv[1])).tolist()))")
    tests_dir = str(Path(__file__).parent)
    for seed in ("1", "2"):
        out = subprocess.run([sys.executable, "-c", code, json.dumps(TEXTS)], capture_output=True, text=True,
                             cwd=tests_dir, env={"PYTHONHASHSEED": seed, "PYTHONPATH": tests_dir}, timeout=120,
                             check=True)
        other = np.asarray(json.loads(out.stdout), dtype=np.float32)
        np.testing.assert_array_equal(other, fake.embed_documents(TEXTS))


def test_similar_texts_score_higher_than_unrelated_ones(fake):
    text = "The billing database moved to PostgreSQL after the January outage."
    near = "the billing database was moved to postgres after the january outage"
    unrelated = "Lunch menu for the offsite: vegetarian options and coffee."
    v, n, u = fake.embed_documents([text, near, unrelated])
    assert float(v @ v) == pytest.approx(1.0, abs=1e-6)
    assert float(v @ n) > 0.6
    assert float(v @ n) > float(v @ u) + 0.3
    # a query sharing words with one document ranks it first
    query = fake.embed_query("billing database outage")
    assert float(query @ v) > float(query @ u)


def test_texts_built_alike_do_not_tie(fake):
    """Stores order tied hits each their own way, so the fake, like a real model, must not tie: one user's notes
    from test_store_conformance.py, which words and 3-grams alone score in 5 distinct values for 10 notes."""
    notes = [f"note {i} on topic {i % 7}" for i in range(3, 400, 40)]
    scores = fake.embed_documents(notes) @ fake.embed_query("note on topic 2")
    assert np.diff(np.sort(scores)).min() > 1e-5
