"""Re-ranking over HTTP (#51.2): /v1/query and /v1/ask take the field table's `rerank` and `rerank_top_n`, and the
results are re-ordered by the server's re-ranker (sentence max-sim with the real model, as tests/test_rerank.py),
unless the server's config sets `api_rerank = false`: then a request asking for it is a 400 naming the setting."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from ragstead.answer.extractive import ExtractiveAnswerer
from ragstead.api import ApiConfig, create_app
from ragstead.config import load_settings
from ragstead.knowledge_base import KnowledgeBase

FILLER = " ".join(
    f"The office plants on floor {i} are watered on Mondays and the kitchen is cleaned on Fridays." for i in range(25)
)
FILES = {  # the answer sits past the embedder's window in long.md: the chunk vector misses it, a sentence says it
    "kb/users/alice/long.md": FILLER + " We migrated the billing database to PostgreSQL 16 in March.",
    "kb/users/alice/near.md": "Billing notes: invoices go out monthly and the billing team reviews the database "
                              "costs every quarter.",
    "kb/users/alice/far.md": "The travel policy allows economy flights under six hours.",
}
QUESTION = "Which database did we migrate billing to?"
BODY = {"query": QUESTION, "mode": "vector", "top_k": 3}


@pytest.fixture
def server(make_project):
    project = make_project(FILES)
    project.settings = project.settings.with_overrides(chunk_size=1000, overlap=0)  # one chunk per file
    project.index()

    def client(config: str = "") -> TestClient:
        (project.root / "ragstead.toml").write_text(f"[ragstead]\nchunk_size = 1000\noverlap = 0\n{config}")
        kb = KnowledgeBase(load_settings(project.root), embedder=project.embedder, providers=[ExtractiveAnswerer()])
        return TestClient(create_app(kb, ApiConfig(auth=False, as_user="alice")))

    return client


def files(response) -> list[str]:  # type: ignore[no-untyped-def]
    assert response.status_code == 200, response.text
    return [row["file_path"].rsplit("/", 1)[-1] for row in response.json()["results"]]


def test_query_and_ask_take_rerank_and_the_results_are_reranked(server):
    with server() as c:
        plain = c.post("/v1/query", json=BODY)
        assert files(plain) == ["near.md", "far.md", "long.md"]
        assert all(row["rerank_score"] is None for row in plain.json()["results"])
        reranked = c.post("/v1/query", json={**BODY, "rerank": True})
        assert files(reranked) == ["near.md", "long.md", "far.md"]  # the answer's chunk climbs past the unrelated one
        assert all(row["rerank_score"] is not None for row in reranked.json()["results"])
        assert reranked.json()["params"]["reranker"].startswith("sentence-maxsim:")
        only_top = c.post("/v1/query", json={**BODY, "rerank": True, "rerank_top_n": 1})
        assert files(only_top) == files(plain) and only_top.json()["results"][1]["rerank_score"] is None
        assert c.post("/v1/query", json={**BODY, "rerank_top_n": 0}).status_code == 422  # the table's limits
        asked = c.post("/v1/ask", json={**BODY, "rerank": True, "rerank_top_n": 5, "extractive": True})
        assert asked.status_code == 200, asked.text
        assert "PostgreSQL 16" in asked.json()["answer"]


def test_a_server_configured_without_rerank_refuses_it_with_a_400_naming_the_setting(server):
    with server("api_rerank = false\n") as c:
        for path in ("/v1/query", "/v1/ask", "/v1/chat"):
            refused = c.post(path, json={**BODY, "rerank": True})
            assert refused.status_code == 400, (path, refused.text)
            error = refused.json()["error"]
            assert error["code"] == "rerank_off" and "api_rerank" in error["message"], path
        assert files(c.post("/v1/query", json={**BODY, "rerank": False})) == ["near.md", "far.md", "long.md"]


def test_v1_limits_lists_rerank_and_its_candidates(server):
    with server() as c:
        fields = c.get("/v1/limits").json()["fields"]
    assert fields["rerank"]["field"] == "rerank" and fields["rerank"]["default"] is False
    assert "api_rerank" in fields["rerank"]["doc"] and fields["rerank"]["requests"] == ["search", "ask"]
    assert (fields["rerank_top_n"]["min"], fields["rerank_top_n"]["max"]) == (1, 200)
