"""The HTTP API through FastAPI's test client: auth, isolation, limits, uploads, deletes, error shapes."""

import pytest
from fastapi.testclient import TestClient

from helpers.pdf_writer import make_pdf
from helpers.project import CountingEmbedder
from ragstead.answer.extractive import ExtractiveAnswerer
from ragstead.api import ApiConfig, create_app
from ragstead.api.keys import KeyFile
from ragstead.knowledge_base import KnowledgeBase


@pytest.fixture
def embedder(request, fake_embedder, real_embedder):
    """Keys, scopes and wiring, not ranking quality: the deterministic fake embedder stands in for the model, but
    for the health check that needs an index built by another model than the fake one it is then served with."""
    if request.node.originalname == "test_health_is_503_with_the_failed_check_when_the_model_is_not_the_indexs":
        return CountingEmbedder(real_embedder)
    return fake_embedder


FILES = {
    "kb/users/alice/billing.md": "Alice decided to migrate the billing database to PostgreSQL.",
    "kb/users/alice/cat.md": "Alice's cat prefers tuna over chicken.",
    "kb/users/bob/salary.md": "Bob's salary review: raise to 95k, confidential.",
    "kb/users/bob/billing.md": "Bob thinks the billing database should stay on MySQL.",
    "kb/team/glossary.md": "Ledger: the append-only table of billing events.",
    "docs/faq.md": "Public FAQ: install the billing client with pip.",
}


@pytest.fixture
def api(make_project):
    project = make_project(FILES)
    project.index()
    keys = KeyFile(project.settings.db_file.parent / "api_keys.json")
    tokens = {
        "alice": keys.add("alice")[0],
        "bob": keys.add("bob")[0],
        "alice-read": keys.add("alice", ["query"])[0],
    }

    def client(**config) -> TestClient:
        # The extractive answerer only: tests never reach an LLM, whatever keys the environment holds.
        kb = KnowledgeBase(project.settings, embedder=project.embedder, providers=[ExtractiveAnswerer()])
        return TestClient(create_app(kb, ApiConfig(**config)))

    return project, tokens, keys, client


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def paths(response) -> set[str]:
    assert response.status_code == 200, response.text
    return {r["file_path"] for r in response.json()["results"]}


def assert_error(response, status: int, code: str) -> None:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"} and body["error"]["code"] == code and body["error"]["message"]
    assert "Traceback" not in response.text


def test_the_key_file_is_owner_only_and_rewritten_whole(api):
    _, _, keys, _ = api
    keys.revoke(keys.list()[0].key_id)
    assert keys.path.stat().st_mode & 0o777 == 0o600
    assert [p.name for p in keys.path.parent.iterdir() if p.name.endswith(".tmp")] == []
    assert len(KeyFile(keys.path).list()) == 3


def test_health_and_readiness(api):
    _, _, _, client = api
    with client() as c:
        assert c.get("/livez").json() == {"status": "ok"}
        health = c.get("/healthz")
        assert health.status_code == 200 and health.json()["status"] == "ready"
        assert {name: check["ok"] for name, check in health.json()["checks"].items()} == {
            "store": True, "embedder": True, "model_guard": True}
        ready = c.get("/readyz").json()
        assert ready["status"] == "ready" and ready["chunks"] == len(FILES)
        assert c.get("/openapi.json").json()["paths"]["/v1/query"]


def test_health_is_503_with_the_failed_check_when_the_model_is_not_the_indexs(api):
    from helpers.fake_embedder import HashingEmbedder

    project = api[0]
    kb = KnowledgeBase(project.settings, embedder=HashingEmbedder(), providers=[ExtractiveAnswerer()])
    with TestClient(create_app(kb, ApiConfig())) as c:
        health = c.get("/healthz")
        assert health.status_code == 503 and health.json()["status"] == "not_ready"
        checks = health.json()["checks"]
        assert checks["store"]["ok"] and checks["embedder"]["ok"] and not checks["model_guard"]["ok"]
        assert "was built with" in checks["model_guard"]["error"]
        assert c.get("/livez").status_code == 200


def test_missing_bad_and_revoked_keys_are_refused(api):
    _, tokens, keys, client = api
    with client() as c:
        assert_error(c.post("/v1/query", json={"query": "billing"}), 401, "unauthorized")
        assert_error(c.post("/v1/query", json={"query": "billing"}, headers=auth("rsk_wrong")), 401, "unauthorized")
        assert_error(c.post("/v1/query", json={"query": "x"}, headers={"Authorization": tokens["bob"]}), 401,
                     "unauthorized")  # no Bearer scheme
        bob = next(k for k in keys.list() if k.user_slug == "bob")
        keys.revoke(bob.key_id)
        assert_error(c.post("/v1/query", json={"query": "billing"}, headers=auth(tokens["bob"])), 401, "unauthorized")


@pytest.mark.parametrize("mode", ["vector", "lexical", "hybrid"])
def test_a_key_sees_only_its_users_private_documents(api, mode):
    _, tokens, _, client = api
    with client() as c:
        for question in ("billing database", "Bob salary raise confidential", "cat tuna", "ledger"):
            alice = paths(c.post("/v1/query", json={"query": question, "mode": mode, "top_k": 20},
                                 headers=auth(tokens["alice"])))
            bob = paths(c.post("/v1/query", json={"query": question, "mode": mode, "top_k": 20},
                               headers=auth(tokens["bob"])))
            assert alice <= {"kb/users/alice/billing.md", "kb/users/alice/cat.md"}, (question, alice)
            assert bob <= {"kb/users/bob/salary.md", "kb/users/bob/billing.md"}, (question, bob)
        public = paths(c.post("/v1/query", json={"query": "billing", "scope": "public", "mode": mode},
                              headers=auth(tokens["alice"])))
        assert public == {"docs/faq.md"}


def test_the_body_cannot_choose_the_user(api):
    _, tokens, _, client = api
    with client() as c:
        for smuggled in ({"user_slug": "bob"}, {"user": "bob"}, {"filters": {"user_slug": "bob"}}):
            response = c.post("/v1/query", json={"query": "salary", **smuggled}, headers=auth(tokens["alice"]))
            assert_error(response, 422, "invalid_request")


def test_query_results_carry_scores_ranks_checksum_and_provenance(api):
    _, tokens, _, client = api
    with client() as c:
        out = c.post("/v1/query", json={"query": "billing database PostgreSQL"}, headers=auth(tokens["alice"])).json()
    top = out["results"][0]
    assert top["file_path"] == "kb/users/alice/billing.md" and top["final_rank"] == 1
    for field in ("dense_distance", "lexical_score", "fused_score", "vector_rank", "lexical_rank", "file_hash",
                  "chunk_id", "doc_id", "snippet"):
        assert top[field] is not None, field
    assert out["filters"]["user_slug"] == "alice" and out["filters"]["private_only"] is True
    assert (out["params"]["feedback_k"], out["params"]["feedback_weight"]) == (2, 0.5)  # the config's
    with client() as c:
        body = {"query": "billing database PostgreSQL", "feedback_k": 0}
        off = c.post("/v1/query", json=body, headers=auth(tokens["alice"])).json()
    assert off["params"]["feedback_k"] == 0 and off["results"][0]["file_path"] == top["file_path"]


@pytest.mark.parametrize(
    "body",
    [{"query": ""}, {"query": "x", "top_k": 0}, {"query": "x", "top_k": 101}, {"query": "x", "mode": "magic"},
     {"query": "x" * 5000}, {"query": 5}, {}, {"query": "x", "date_from": "yesterday"},
     {"query": "x", "doc_types": ["secret"]}, {"query": "x", "date_from": "2025-05-01", "date_to": "2025-01-01"},
     {"query": "x", "feedback_k": 21}, {"query": "x", "feedback_k": -1}, {"query": "x", "feedback_weight": -1}],
)
def test_malformed_queries_get_a_clear_json_error(api, body):
    _, tokens, _, client = api
    with client() as c:
        response = c.post("/v1/query", json=body, headers=auth(tokens["alice"]))
    assert response.status_code in (400, 422)
    assert_error(response, response.status_code, response.json()["error"]["code"])


def test_operator_injection_in_the_query_is_just_text(api):
    _, tokens, _, client = api
    with client() as c:
        for hostile in ('user:bob OR salary', 'scope:"private:1" AND *', "'; DROP TABLE chunks; --", "NOT alice"):
            body = {"query": hostile, "mode": "lexical"}
            found = paths(c.post("/v1/query", json=body, headers=auth(tokens["alice"])))
            assert not any(p.startswith("kb/users/bob/") for p in found)


def test_oversized_bodies_are_refused_by_length_and_while_streaming(api):
    _, tokens, _, client = api
    with client(max_body_bytes=2000) as c:
        big = {"query": "billing", "tags": ["x" * 3000]}
        assert_error(c.post("/v1/query", json=big, headers=auth(tokens["alice"])), 413, "request_too_large")

        def stream():
            for _ in range(10):
                yield b"x" * 500

        response = c.post("/v1/query", content=stream(), headers={**auth(tokens["alice"]),
                                                                  "Content-Type": "application/json"})
        assert_error(response, 413, "request_too_large")


def test_rate_limit_per_key_with_retry_after(api):
    _, tokens, _, client = api
    with client(rate_per_minute=3, burst=0) as c:
        codes = [c.post("/v1/query", json={"query": "cat"}, headers=auth(tokens["alice"])).status_code
                 for _ in range(4)]
        assert codes == [200, 200, 200, 429]
        limited = c.post("/v1/query", json={"query": "cat"}, headers=auth(tokens["alice"]))
        assert_error(limited, 429, "rate_limited")
        assert 1 <= int(limited.headers["Retry-After"]) <= 60
        # Another key has its own budget.
        assert c.post("/v1/query", json={"query": "cat"}, headers=auth(tokens["bob"])).status_code == 200
    with client(rate_per_minute=0, burst=0) as c:  # 0 disables
        assert all(c.post("/v1/query", json={"query": "cat"}, headers=auth(tokens["alice"])).status_code == 200
                   for _ in range(10))


def test_scopes_limit_what_a_key_may_do(api):
    _, tokens, _, client = api
    with client() as c:
        reader = auth(tokens["alice-read"])
        assert c.post("/v1/query", json={"query": "cat"}, headers=reader).status_code == 200
        files = {"file": ("n.md", b"a note", "text/markdown")}
        assert_error(c.post("/v1/documents", files=files, headers=reader), 403, "forbidden")
        doc_id = c.get("/v1/documents", headers=reader).json()["documents"][0]["doc_id"]
        assert_error(c.delete(f"/v1/documents/{doc_id}", headers=reader), 403, "forbidden")


def test_upload_indexes_into_the_callers_own_folder_only(api):
    project, tokens, _, client = api
    with client() as c:
        files = {"file": ("trip.md", b"Alice's trip to Lisbon: flights booked for the pelican conference.",
                          "text/markdown")}
        response = c.post("/v1/documents", files=files, headers=auth(tokens["alice"]))
        assert response.status_code == 201, response.text
        doc = response.json()["document"]
        assert doc["file_path"] == "kb/users/alice/uploads/trip.md" and doc["user_slug"] == "alice"
        assert doc["is_private"] and doc["chunks"] == 1
        assert (project.root / "kb/users/alice/uploads/trip.md").exists()
        assert "kb/users/alice/uploads/trip.md" in paths(
            c.post("/v1/query", json={"query": "pelican conference Lisbon"}, headers=auth(tokens["alice"])))
        assert not any("trip" in p for p in paths(
            c.post("/v1/query", json={"query": "pelican conference Lisbon"}, headers=auth(tokens["bob"]))))
        listed = {d["file_path"] for d in c.get("/v1/documents", headers=auth(tokens["alice"])).json()["documents"]}
        assert listed == {"kb/users/alice/billing.md", "kb/users/alice/cat.md", "kb/users/alice/uploads/trip.md"}


@pytest.mark.parametrize(
    ("name", "status", "code"),
    [("../../bob/x.md", 422, "invalid_filename"), ("..", 422, "invalid_filename"), (".hidden.md", 422,
     "invalid_filename"), ("a/b.md", 422, "invalid_filename"), ("run.exe", 415, "unsupported_type"),
     ("", 422, "invalid_request")],
)
def test_bad_upload_names_and_types_are_refused(api, name, status, code):
    project, tokens, _, client = api
    with client() as c:
        response = c.post("/v1/documents", files={"file": (name, b"text", "text/plain")}, headers=auth(tokens["alice"]))
    assert response.status_code == status, response.text
    assert response.json()["error"]["code"] in (code, "invalid_request")
    assert not (project.root / "kb/users/bob/x.md").exists()


def test_a_corrupt_upload_is_refused_and_loses_nothing(api):
    project, tokens, _, client = api
    with client() as c:
        good = make_pdf(["quarterly pelican census results"])
        assert c.post("/v1/documents", files={"file": ("r.pdf", good, "application/pdf")},
                      headers=auth(tokens["alice"])).status_code == 201
        before = project.store.stats()["chunks"]
        response = c.post("/v1/documents", files={"file": ("r.pdf", b"%PDF-1.4 garbage", "application/pdf")},
                          headers=auth(tokens["alice"]))
        assert_error(response, 422, "unreadable_file")
        assert (project.root / "kb/users/alice/uploads/r.pdf").read_bytes() == good  # the old file is back
        assert project.store.stats()["chunks"] == before
        assert "kb/users/alice/uploads/r.pdf" in paths(
            c.post("/v1/query", json={"query": "pelican census"}, headers=auth(tokens["alice"])))
        response = c.post("/v1/documents", files={"file": ("new.pdf", b"not a pdf", "application/pdf")},
                          headers=auth(tokens["alice"]))
        assert_error(response, 422, "unreadable_file")
        assert not (project.root / "kb/users/alice/uploads/new.pdf").exists()


def test_upload_size_limit(api):
    _, tokens, _, client = api
    with client(max_upload_bytes=1000) as c:
        response = c.post("/v1/documents", files={"file": ("big.txt", b"x " * 2000, "text/plain")},
                          headers=auth(tokens["alice"]))
    assert_error(response, 413, "request_too_large")


def test_delete_removes_the_file_and_every_index_entry_but_only_for_the_owner(api):
    project, tokens, _, client = api
    with client() as c:
        docs = c.get("/v1/documents", headers=auth(tokens["alice"])).json()["documents"]
        doc = next(d for d in docs if d["file_path"] == "kb/users/alice/cat.md")
        # Bob cannot delete it, and cannot tell it exists.
        assert_error(c.delete(f"/v1/documents/{doc['doc_id']}", headers=auth(tokens["bob"])), 404, "not_found")
        assert_error(c.delete(f"/v1/documents/{'0' * 64}", headers=auth(tokens["bob"])), 404, "not_found")
        assert_error(c.delete("/v1/documents/..%2F..%2Fetc", headers=auth(tokens["bob"])), 404, "not_found")
        response = c.delete(f"/v1/documents/{doc['doc_id']}", headers=auth(tokens["alice"]))
        assert response.status_code == 200, response.text
        assert not (project.root / "kb/users/alice/cat.md").exists()
        for mode in ("vector", "lexical"):
            found = paths(c.post("/v1/query", json={"query": "cat tuna chicken", "mode": mode, "top_k": 20},
                                 headers=auth(tokens["alice"])))
            assert "kb/users/alice/cat.md" not in found
    assert project.store.get_document(doc["doc_id"]) is None
    assert project.store.integrity_check() == "ok"


def test_team_documents_are_not_visible_to_user_keys(api):
    _, tokens, _, client = api
    with client() as c:
        found = paths(c.post("/v1/query", json={"query": "ledger append-only", "top_k": 20},
                             headers=auth(tokens["alice"])))
    assert "kb/team/glossary.md" not in found


def test_a_crash_inside_a_handler_is_a_json_500_without_a_trace(api, monkeypatch):
    _, tokens, _, client = api
    monkeypatch.setattr(KnowledgeBase, "search", lambda *a, **k: 1 / 0)
    with client() as c:
        c_raise = TestClient(c.app, raise_server_exceptions=False)
        response = c_raise.post("/v1/query", json={"query": "cat"}, headers=auth(tokens["alice"]))
    assert_error(response, 500, "internal_error")
    assert "ZeroDivision" not in response.text


def test_no_auth_needs_a_user_and_repeated_queries_hit_the_embedding_cache(api):
    from ragstead.errors import RagsteadError

    project, _, _, client = api
    for as_user in (None, "../bob", "a/b", ""):
        with pytest.raises(RagsteadError):
            create_app(KnowledgeBase(project.settings, embedder=project.embedder, providers=[]),
                     ApiConfig(auth=False, as_user=as_user))
    with client(auth=False, as_user="alice") as c:
        for _ in range(3):
            assert paths(c.post("/v1/query", json={"query": "billing database"})) <= {
                "kb/users/alice/billing.md", "kb/users/alice/cat.md"}
        assert c.app.state.kb.embedder.hits == 2 and c.app.state.kb.embedder.misses == 1


def test_ask_citations_quote_the_chunk_text_at_their_offsets(api):
    _, tokens, _, client = api
    with client() as c:
        out = c.post("/v1/ask", json={"query": "Which database did Alice decide to migrate billing to?",
                                      "extractive": True}, headers=auth(tokens["alice"])).json()
        for cited in out["citations"]:
            chunk = c.get(f"/v1/chunks/{cited['locator']['chunk_id']}?around=0&scope=private",
                          headers=auth(tokens["alice"])).json()["chunks"][0]
            assert cited["quote"] and chunk["text"][cited["char_start"]:cited["char_end"]] == cited["quote"]


def test_ask_answers_from_the_callers_documents_only_or_refuses(api):
    _, tokens, _, client = api
    with client() as c:
        out = c.post("/v1/ask", json={"query": "Which database did Alice decide to migrate billing to?",
                                      "extractive": True}, headers=auth(tokens["alice"])).json()
        assert not out["refused"] and "PostgreSQL" in out["answer"] and out["provider"] == "extractive"
        assert {x["source"] for x in out["citations"]} == {"kb/users/alice/billing.md"}
        bob = c.post("/v1/ask", json={"query": "Which database did Alice decide to migrate billing to?",
                                      "extractive": True}, headers=auth(tokens["bob"])).json()
        assert all(x["source"].startswith("kb/users/bob/") for x in bob["citations"])
        refused = c.post("/v1/ask", json={"query": "best pancake recipe without eggs"},
                         headers=auth(tokens["alice"])).json()
        assert refused["refused"] and refused["citations"] == []
        assert refused["answer"] == "I could not find relevant information in the uploaded documents."
        assert_error(c.post("/v1/ask", json={"query": "cat"}, headers=auth(tokens["alice-read"])), 403, "forbidden")
        assert_error(c.post("/v1/ask", json={"query": "cat", "user_slug": "bob"}, headers=auth(tokens["alice"])),
                     422, "invalid_request")


def _docx(text: str) -> bytes:
    import io

    import docx

    document = docx.Document()
    document.add_paragraph(text)
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def test_a_broken_docx_over_a_good_one_is_a_422_that_keeps_the_good_one_and_shows_no_server_path(api):
    project, tokens, _, client = api
    good = _docx("The osprey nest count doubled this spring.")
    broken = good[: len(good) // 2]  # a truncated zip
    with client() as c:
        assert c.post("/v1/documents", files={"file": ("birds.docx", good)}, headers=auth(tokens["alice"])
                      ).status_code == 201
        response = c.post("/v1/documents", files={"file": ("birds.docx", broken)}, headers=auth(tokens["alice"]))
        assert_error(response, 422, "unreadable_file")
        assert str(project.root) not in response.text and "/tmp" not in response.text
        assert (project.root / "kb/users/alice/uploads/birds.docx").read_bytes() == good
        assert "kb/users/alice/uploads/birds.docx" in paths(
            c.post("/v1/query", json={"query": "osprey nest count"}, headers=auth(tokens["alice"])))
    assert not [p for p in (project.root / "kb/users/alice/uploads").iterdir() if p.name.startswith(".")]


def test_an_upload_refused_as_busy_changes_nothing_on_disk_or_in_the_index(api):
    from ragstead.indexing.lock import index_lock

    project, tokens, _, client = api
    with client(index_wait_seconds=0.2) as c:
        old = b"The heron colony has forty nests."
        assert c.post("/v1/documents", files={"file": ("herons.txt", old)}, headers=auth(tokens["alice"])
                      ).status_code == 201
        with index_lock(project.settings.lock_file):  # another index run holds the lock
            response = c.post("/v1/documents", files={"file": ("herons.txt", b"The heron colony moved away.")},
                              headers=auth(tokens["alice"]))
        assert_error(response, 503, "index_busy")
        assert (project.root / "kb/users/alice/uploads/herons.txt").read_bytes() == old
    report = project.index()  # the next index run sees the old file, unchanged: nothing removed
    assert "kb/users/alice/uploads/herons.txt" not in report.removed + report.updated
    assert "kb/users/alice/uploads/herons.txt" in {d["file_path"] for d in project.store.list_documents(
        __import__("ragstead").QueryFilters.build(user_slug="alice"))}


def test_query_results_are_trimmed_to_a_token_budget_at_chunk_boundaries(api):
    project, tokens, _, client = api
    project.write({f"kb/users/alice/long-{i}.md": f"Billing note {i}: " + "the ledger reconciles invoices. " * 60
                   for i in range(4)})
    project.index()
    body = {"query": "billing ledger invoices", "top_k": 5}
    with client() as c:
        full = c.post("/v1/query", json=body, headers=auth(tokens["alice"])).json()
        assert full["budget"]["cut"] == 0 and full["budget"]["max_tokens"] == 8000  # the server's default
        sizes = [r["token_estimate"] for r in full["results"]]
        limit = sizes[0] + sizes[1] + sizes[2] // 2  # two chunks and half of the third
        cut = c.post("/v1/query", json={**body, "max_tokens": limit}, headers=auth(tokens["alice"])).json()
        assert [r["chunk_id"] for r in cut["results"]] == [r["chunk_id"] for r in full["results"][:2]]
        assert cut["budget"] == {"max_tokens": limit, "used_tokens": sizes[0] + sizes[1], "returned": 2,
                                 "cut": len(sizes) - 2, "cut_tokens": sum(sizes[2:]),
                                 "cut_chunk_ids": [r["chunk_id"] for r in full["results"][2:]]}
        assert c.post("/v1/query", json={**body, "max_tokens": 0}, headers=auth(tokens["alice"])).status_code == 422
    with client(max_tokens=0) as c:
        assert "budget" not in c.post("/v1/query", json=body, headers=auth(tokens["alice"])).json()


def test_an_upload_name_ending_in_a_newline_is_refused(api):
    from ragstead.errors import InvalidQueryError

    project, _, _, _ = api
    with KnowledgeBase(project.settings, embedder=project.embedder) as kb, \
            pytest.raises(InvalidQueryError, match="file name"):
        kb.upload("trip.md\n", b"A trip note.", user="alice")
    assert not (project.root / "kb/users/alice/uploads").exists()


@pytest.mark.parametrize("path", ["/docs", "/redoc", "/static-offline-docs/swagger-ui-bundle.js"])
def test_the_api_docs_have_the_page_s_framing_and_script_headers(api, path):
    import base64
    import hashlib
    import re

    _, _, _, client = api
    with client() as c:
        page = c.get("/")
        response = c.get(path)
    assert response.status_code == 200
    for name in ("X-Frame-Options", "X-Content-Type-Options", "Referrer-Policy"):
        assert response.headers[name] == page.headers[name], name
    policy = response.headers["Content-Security-Policy"]
    assert "frame-ancestors 'none'" in policy and "default-src 'none'" in policy and "unsafe-eval" not in policy
    assert "'unsafe-inline'" not in policy.split("script-src", 1)[1].split(";", 1)[0]
    for script in re.findall(r"<script>(.*?)</script>", response.text, re.DOTALL):  # Swagger UI's own, allowed
        digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
        assert f"'sha256-{digest}'" in policy


def test_only_http_source_links_reach_a_client(make_project):
    """Front matter is anyone's text: a `javascript:` link there must not become a citation link."""
    project = make_project({
        "kb/users/alice/evil.md": "---\nsource_url: javascript:alert(document.cookie)\n"
                                  "canonical_url: data:text/html,<script>alert(1)</script>\n---\n"
                                  "# Evil\n\nThe pelican migration notes, with a hostile link.",
        "kb/users/alice/good.md": "---\nsource_url: https://example.org/pelicans\nsource_type: Article\n"
                                  "canonical_url: javascript:alert(2)\n---\n# Good\n\nThe pelican census results.",
    })
    project.index()
    keys = KeyFile(project.settings.db_file.parent / "api_keys.json")
    token = keys.add("alice")[0]
    kb = KnowledgeBase(project.settings, embedder=project.embedder, providers=[ExtractiveAnswerer()])
    with TestClient(create_app(kb, ApiConfig())) as c:
        found = c.post("/v1/query", json={"query": "pelican migration census", "top_k": 5}, headers=auth(token))
        assert found.status_code == 200, found.text
        results = found.json()["results"]
        chunk = c.get(f"/v1/chunks/{results[0]['chunk_id']}", headers=auth(token))
        asked = c.post("/v1/ask", json={"question": "pelican migration notes"}, headers=auth(token))
    assert {r["file_path"] for r in results} == {"kb/users/alice/evil.md", "kb/users/alice/good.md"}
    for body in (found.text, chunk.text, asked.text):
        assert "javascript:" not in body and "data:text" not in body
    good = next(r for r in results if r["file_path"].endswith("good.md"))
    assert good["source_url"] == good["link"] == "https://example.org/pelicans"
    assert next(r for r in results if r["file_path"].endswith("evil.md"))["source_url"] is None


def test_a_wrong_method_names_the_one_the_route_takes(api):
    _, tokens, _, client = api
    with client() as c:
        query = c.get("/v1/query", params={"q": "billing"}, headers=auth(tokens["alice"]))
        chunk = c.post("/v1/chunks/abc", headers=auth(tokens["alice"]))
    assert_error(query, 405, "method_not_allowed")
    assert query.json()["error"]["message"] == 'use POST /v1/query with a JSON body {"query": …}; see /docs'
    assert query.headers["allow"] == "POST"
    assert_error(chunk, 405, "method_not_allowed")
    assert chunk.json()["error"]["message"] == "use GET /v1/chunks/abc; see /docs"


@pytest.mark.parametrize(("body", "hint"), [({"query": "x", "k": 5}, "k: Extra inputs are not permitted (did you mean "
                                             "`top_k`?)"),
                                            ({"query": "x", "doc_type": ["note"]}, "(did you mean `doc_types`?)"),
                                            ({"query": "x", "modes": "lexical"}, "(did you mean `mode`?)"),
                                            ({"query": "x", "date-from": "2025-01-01"}, "(did you mean "
                                             "`date_from`?)"),
                                            ({"query": "x", "public_only": True}, "(did you mean `scope`?)")])
def test_an_unknown_field_suggests_this_doors_name_for_it(api, body, hint):
    _, tokens, _, client = api
    with client() as c:
        response = c.post("/v1/query", json=body, headers=auth(tokens["alice"]))
    assert_error(response, 422, "invalid_request")
    assert hint in response.json()["error"]["message"]


def test_an_unknown_field_like_nothing_gets_no_suggestion(api):
    _, tokens, _, client = api
    with client() as c:
        response = c.post("/v1/query", json={"query": "x", "zzzz": 1}, headers=auth(tokens["alice"]))
    assert response.json()["error"]["message"] == "zzzz: Extra inputs are not permitted"


def test_a_key_whose_user_owns_nothing_is_told_so_without_a_word_about_others(api):
    _, tokens, keys, client = api
    carol = keys.add("carol")[0]
    with client() as c:
        for body in ({"query": "billing database"}, {"query": "Bob salary", "mode": "lexical"}):
            out = c.post("/v1/query", json=body, headers=auth(carol))
            assert out.status_code == 200 and out.json()["results"] == []
            note = out.json()["note"]
            assert note == "no documents are visible to user carol; index kb/users/carol/ (or upload a file) or ask " \
                           "the owner"
        listed = c.get("/v1/documents", headers=auth(carol)).json()
        assert listed["documents"] == [] and listed["note"] == note
        asked = c.post("/v1/ask", json={"query": "billing database", "extractive": True}, headers=auth(carol)).json()
        assert asked["refused"] and note in asked["notes"]
        # Nothing about anyone else: no other user, no count, and the same note whatever the others own.
        assert not any(word in note for word in ("alice", "bob", "team")) and not any(ch.isdigit() for ch in note)
        # A public search is everyone's, and a user who owns documents gets no note even for an empty result.
        public = c.post("/v1/query", json={"query": "billing", "scope": "public"}, headers=auth(carol)).json()
        assert public["results"] and "note" not in public
        empty = c.post("/v1/query", json={"query": "zyxwvut", "mode": "lexical"}, headers=auth(tokens["alice"]))
        assert empty.json()["results"] == [] and "note" not in empty.json()
        assert "note" not in c.get("/v1/documents", headers=auth(tokens["alice"])).json()
