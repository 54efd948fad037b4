from datetime import UTC, datetime

import pytest

from ragstead.config import load_settings
from ragstead.documents.ids import make_chunk_id, make_doc_id, sha256_text
from ragstead.documents.metadata import PathRule, derive_metadata
from ragstead.errors import ConfigError

WALLET = "0xAbCdEf0123456789abcdef0123456789ABCDEF01"


@pytest.mark.parametrize(
    ("path", "doc_type", "private", "user"),
    [
        ("kb/users/alice/notes.md", "user_kb", True, "alice"),
        ("artifacts/dossiers/bob/x.md", "dossier", True, "bob"),
        ("kb/team/glossary.md", "kb", True, None),
        ("artifacts/report.md", "artifact", True, None),
        ("docs/faq.md", "docs", False, None),
        ("docs/archive/old.md", "archive", False, None),
        ("elsewhere/file.md", "kb", True, None),  # unmatched: private, never public by accident
    ],
)
def test_path_rules(path, doc_type, private, user):
    meta = derive_metadata(path, 0.0)
    assert (meta.doc_type, meta.is_private, meta.user_slug) == (doc_type, private, user)


def test_wallet_and_date_from_path_else_mtime():
    meta = derive_metadata(f"artifacts/dossiers/alice/{WALLET}/2025-02-30-bad-2024-07-09.md", 0.0)
    assert meta.subject == WALLET.lower()
    assert meta.created_at == "2024-07-09T00:00:00+00:00"  # 2025-02-30 is not a date, skipped
    mtime = datetime(2023, 5, 6, 7, 8, 9, tzinfo=UTC).timestamp()
    assert derive_metadata("kb/x.md", mtime).created_at == "2023-05-06T07:08:09+00:00"


def test_custom_rules_from_config_come_first(tmp_path):
    (tmp_path / "ragstead.toml").write_text(
        '[ragstead]\nchunk_size = 200\n\n[[path_rules]]\npattern = "^kb/clients/(?P<user_slug>[^/]+)/"\n'
        'doc_type = "dossier"\nis_private = true\ntags = ["client"]\n'
    )
    settings = load_settings(tmp_path)
    assert settings.chunk_size == 200
    meta = derive_metadata("kb/clients/acme/brief.md", None, settings.path_rules)
    assert (meta.doc_type, meta.user_slug, meta.tags) == ("dossier", "acme", ["client"])


def test_config_precedence_file_then_env(tmp_path, monkeypatch):
    (tmp_path / "ragstead.toml").write_text("[ragstead]\nrrf_k = 30\ntop_k_vector = 40\n")
    monkeypatch.setenv("RAGSTEAD_RRF_K", "10")
    settings = load_settings(tmp_path)
    assert (settings.rrf_k, settings.top_k_vector) == (10, 40)
    assert settings.with_overrides(rrf_k=5, top_k_vector=None).rrf_k == 5


@pytest.mark.parametrize(
    "content",
    [
        "[ragstead]\nnot_a_key = 1\n",
        "[ragstead\n",
        '[[path_rules]]\npattern = "^x/"\ndoc_type = "secret"\nis_private = true\n',
        "[ragstead]\nchunk_size = 'big'\n",
    ],
)
def test_bad_config_is_a_clear_error(tmp_path, content):
    (tmp_path / "ragstead.toml").write_text(content)
    with pytest.raises(ConfigError):
        load_settings(tmp_path)


def test_bad_rule_doc_type_rejected():
    with pytest.raises(ValueError):
        PathRule("^x/", "secret", True)


def test_ids_are_deterministic_sha256():
    doc = make_doc_id("kb/a.md", "f" * 64)
    assert doc == make_doc_id("kb/a.md", "f" * 64) and len(doc) == 64
    assert doc != make_doc_id("kb/b.md", "f" * 64) != make_doc_id("kb/a.md", "e" * 64)
    assert make_chunk_id(doc, 0, sha256_text("x")) != make_chunk_id(doc, 1, sha256_text("x"))
