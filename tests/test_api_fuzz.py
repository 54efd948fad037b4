"""Property-based fuzzing of every endpoint from the app's own OpenAPI document: no input may cause a 500."""

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error

from ragstead.answer.extractive import ExtractiveAnswerer
from ragstead.api import ApiConfig, create_app
from ragstead.knowledge_base import KnowledgeBase


@pytest.fixture
def fuzzed_api(make_project):
    project = make_project({
        "kb/users/alice/billing.md": "Alice decided to migrate the billing database to PostgreSQL.",
        "kb/users/bob/salary.md": "Bob's salary review, confidential.",
        "docs/faq.md": "Public FAQ: install the client with pip.",
    })
    project.index()
    # No auth (acting as alice) so the fuzzer reaches the handlers, not just the 401 path; no rate limit.
    app = create_app(KnowledgeBase(project.settings, embedder=project.embedder, providers=[ExtractiveAnswerer()]),
                     ApiConfig(auth=False, as_user="alice", rate_per_minute=0, burst=0, max_upload_bytes=200_000))
    return schemathesis.openapi.from_asgi("/openapi.json", app)


@pytest.mark.parametrize("operation_key", ["GET /healthz", "GET /readyz", "POST /v1/query", "POST /v1/ask",
                                           "GET /v1/documents", "POST /v1/documents", "DELETE /v1/documents/{doc_id}",
                                           "GET /v1/findability", "POST /v1/chat", "GET /v1/chat/{conversation_id}",
                                           "DELETE /v1/chat/{conversation_id}"])
def test_no_request_makes_the_server_fail(fuzzed_api, operation_key):
    # Hypothesis drives schemathesis' strategy directly (its pytest fixture plugin does not load on
    # pytest 9); one test per operation so a failure names it.
    operations = {f"{op.method.upper()} {op.path}": op for op in (r.ok() for r in fuzzed_api.get_all_operations())}
    assert set(operations) >= {operation_key}

    @given(case=operations[operation_key].as_strategy())
    @settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
    def fuzz(case):
        response = case.call_and_validate(checks=[not_a_server_error])
        if response.status_code >= 400:
            assert set(response.json()) == {"error"}, response.text  # the stable error shape, always

    fuzz()
