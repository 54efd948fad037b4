"""Queries accept any input: invalid UTF-8 from argv, lone surrogates and control characters never reach a
tokenizer or a driver, the library raises only RagsteadError for bad input, and JSON output is valid UTF-8."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers.project import OFFLINE_ENV
from ragstead import KnowledgeBase, RagsteadError
from ragstead.answer.extractive import ExtractiveAnswerer
from ragstead.filters import clean_text

FILES = {
    "kb/users/alice/cafe.md": "The café billing review moved invoices to PostgreSQL.",
    "kb/users/bob/notes.md": "Bob's private notes about the billing database.",
    "docs/faq.md": "Public FAQ about billing.",
}


@pytest.fixture(scope="module")
def kb(tmp_path_factory, hashing_embedder):
    from helpers.project import write_files
    from ragstead.config import load_settings

    root = tmp_path_factory.mktemp("query-input")
    write_files(root, FILES)
    knowledge = KnowledgeBase(load_settings(root).with_overrides(roots=("kb", "docs")), embedder=hashing_embedder,
                              providers=[ExtractiveAnswerer()])
    knowledge.index()
    yield knowledge
    knowledge.close()


def test_clean_text_replaces_what_is_not_valid_unicode():
    assert clean_text("caf\udce9 billing") == "caf\ufffd billing"  # argv bytes b"caf\xe9" (Latin-1)
    assert clean_text("a\ud800b") == "a\ufffdb"  # a lone high surrogate
    assert clean_text("a\x00b\x1b[31mc\x7f") == "a b [31mc "
    assert clean_text("tab\tand\nnewline, é 日本") == "tab\tand\nnewline, é 日本"


any_text = st.one_of(
    st.text(max_size=200),
    st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x10FFFF, blacklist_categories=()), max_size=80),
    st.sampled_from(["\udce9", "\ud800", "\x00", " ", "billing \udcff\udcfe", "*" * 5000, "AND OR NOT (",
                     "caf\udce9 billing", "'; DROP TABLE chunks; --"]),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(question=any_text, mode=st.sampled_from(["vector", "lexical", "hybrid"]), tag=st.one_of(st.none(), any_text))
def test_search_and_ask_take_any_text_and_raise_only_ragstead_errors(kb, question, mode, tag):
    try:
        result = kb.search(question, mode=mode, user="alice", tags=[tag] if tag else ())
    except RagsteadError:
        return  # empty, oversized or an unusable tag: a clear error is a fine answer
    encoded = json.dumps(result.to_dict(), ensure_ascii=False).encode("utf-8")  # raises on a lone surrogate
    assert json.loads(encoded)["question"] == result.question
    assert all(hit.user_slug == "alice" for hit in result.hits)
    try:
        answer = kb.ask(question, mode=mode, user="alice", extractive=True)
    except RagsteadError:
        return
    json.dumps(answer.to_dict(), ensure_ascii=False).encode("utf-8")


def _run(root, *args: bytes) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([os.fsencode(sys.executable), b"-m", b"ragstead", *args, b"--root", os.fsencode(root)],
                          capture_output=True, env=OFFLINE_ENV, timeout=300)


@pytest.fixture(scope="module")
def project_root(tmp_path_factory):
    from helpers.project import write_files

    root = tmp_path_factory.mktemp("argv")
    write_files(root, FILES)
    assert _run(root, b"index", b"--roots", b"kb,docs", b"-q").returncode == 0
    return root


@pytest.mark.parametrize("mode", [b"--lexical-only", b"--vector", b"--hybrid"])
def test_invalid_utf8_in_argv_gives_valid_json_and_no_traceback(project_root, mode):
    out = _run(project_root, b"query", b"caf\xe9 billing", mode, b"--user", b"alice", b"--json")
    assert out.returncode == 0, out.stderr
    assert b"Traceback" not in out.stderr
    payload = json.loads(out.stdout.decode("utf-8"))  # strict: the bytes are valid UTF-8
    assert payload["question"] == "caf\ufffd billing"
    assert {row["user_slug"] for row in payload["results"]} <= {"alice"}


def test_invalid_utf8_in_ask_and_in_a_tag_is_no_traceback(project_root):
    out = _run(project_root, b"ask", b"caf\xe9 \x1b[2J billing?", b"--user", b"alice", b"--extractive",
               b"--format", b"json", b"--tag", b"\xff\xfe")
    assert out.returncode == 0, out.stderr
    assert b"Traceback" not in out.stderr
    json.loads(out.stdout.decode("utf-8"))
    # Control characters only: a valid question with no words (as punctuation is): no lexical match, no error.
    controls = _run(project_root, b"query", b"\x01\x02 \x7f", b"--user", b"alice", b"--lexical-only", b"--json")
    assert controls.returncode == 0 and b"Traceback" not in controls.stderr  # argv cannot hold NUL
    assert json.loads(controls.stdout.decode("utf-8"))["results"] == []
    blank = _run(project_root, b"query", b"   ", b"--user", b"alice")
    assert blank.returncode == 2 and blank.stderr.decode("utf-8").startswith("error: the question is empty")


@pytest.mark.parametrize("slug", ["alice\n", "alice\r\n", "../alice", "alice/bob", "", "a" * 129])
def test_a_user_slug_with_a_trailing_newline_or_a_path_is_refused(slug):
    from ragstead.errors import InvalidQueryError
    from ragstead.filters import QueryFilters

    with pytest.raises(InvalidQueryError):
        QueryFilters.build(slug)
