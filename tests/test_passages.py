"""Reading indexed text back (what a citation opens, what `get_document` returns), in every store: in order,
with neighbours, paged, and never across a scope: another user's chunk reads exactly like a missing one."""

from __future__ import annotations

import pytest

from helpers.project import STORE_KINDS, CountingEmbedder, Project, spec_for
from ragstead.errors import DocumentNotFoundError
from ragstead.knowledge_base import KnowledgeBase

WORDS = " ".join(f"word{i}" for i in range(10))
FILES = {
    # Five chunks of 12 words each, the third one naming the heron.
    "kb/users/alice/long.md": " ".join([f"One {WORDS} a.", f"Two {WORDS} b.", f"Heron survey {WORDS}",
                                        f"Four {WORDS} d.", f"Five {WORDS} e."]),
    "kb/users/bob/secret.md": "Bob's kestrel budget is 4711 euros.",
    "docs/faq.md": "Public FAQ about the survey app.",
    "docs/archive/old.md": "Archived heron count from 2019.",
}


@pytest.fixture(scope="module", params=STORE_KINDS)
def kb(request, tmp_path_factory, hashing_embedder):  # type: ignore[no-untyped-def]
    """FILES indexed once per store kind (the model-free embedder): every test here only reads."""
    project = Project(tmp_path_factory.mktemp("passages"), CountingEmbedder(hashing_embedder),
                      spec_for(request.param, request))
    project.write(FILES)
    project.settings = project.settings.with_overrides(chunk_size=12, overlap=0)
    project.index()
    yield KnowledgeBase(project.settings, store=project.store, embedder=project.embedder)
    project.store.close()


def ids(kb: KnowledgeBase, path: str, user: str | None = None, public: bool = False) -> tuple[str, list[str]]:
    doc = next(d for d in kb.documents(user=user, public_only=public) if d["file_path"] == path)
    return doc["doc_id"], [c["chunk_id"] for c in kb.read(doc["doc_id"], user=user, public_only=public).chunks]


def test_a_chunk_opens_with_its_neighbours_in_order(kb):
    doc_id, chunks = ids(kb, "kb/users/alice/long.md", "alice")
    assert len(chunks) == 5
    passage = kb.passage(chunks[2], around=1, user="alice")
    assert [c["chunk_id"] for c in passage.chunks] == chunks[1:4] and passage.focus == chunks[2]
    assert passage.chunks[1]["text"].startswith("Heron survey") and passage.total_chunks == 5
    assert passage.document["file_path"] == "kb/users/alice/long.md" and passage.document["doc_id"] == doc_id
    assert [c["chunk_id"] for c in kb.passage(chunks[0], around=2, user="alice").chunks] == chunks[:3]
    page = kb.read(doc_id, offset=3, limit=10, user="alice")
    assert [c["chunk_id"] for c in page.chunks] == chunks[3:] and page.to_dict()["offset"] == 3


def test_another_users_chunk_reads_like_a_missing_one(kb):
    bob_doc, bob_chunks = ids(kb, "kb/users/bob/secret.md", "bob")
    for call in (lambda: kb.passage(bob_chunks[0], user="alice"), lambda: kb.read(bob_doc, user="alice"),
                 lambda: kb.passage(bob_chunks[0], public_only=True), lambda: kb.read("f" * 64, user="bob"),
                 lambda: kb.passage("../../etc/passwd", user="bob")):
        with pytest.raises(DocumentNotFoundError, match=r"^no such document$"):
            call()


def test_public_and_archive_documents_in_their_scopes(kb):
    faq, _ = ids(kb, "docs/faq.md", public=True)
    assert kb.read(faq, public_only=True).text == "Public FAQ about the survey app."
    with pytest.raises(DocumentNotFoundError):
        kb.read(faq, user="alice")  # the private scope holds private documents only
    archive = next(d for d in kb.documents(public_only=True, include_archive=True) if d["doc_type"] == "archive")
    assert kb.read(archive["doc_id"], public_only=True).text == "Archived heron count from 2019."
    with pytest.raises(DocumentNotFoundError):
        kb.read(archive["doc_id"], public_only=True, include_archive=False)
    with pytest.raises(DocumentNotFoundError):
        kb.read(archive["doc_id"], user="alice")  # a user's scope holds that user's documents only
