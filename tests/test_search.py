import pytest

from helpers.library import search
from helpers.project import CountingEmbedder, Project
from ragstead.errors import InvalidQueryError
from ragstead.filters import QueryFilters
from ragstead.retrieval.search import SearchOptions

FILES = {
    "kb/users/alice/2025-03-01-db.md": "We decided to migrate the billing database to PostgreSQL in March.",
    "kb/users/alice/2024-01-05-pets.md": "---\ntags: [home]\n---\nAlice's cat prefers tuna over chicken.",
    "kb/users/bob/2025-04-02-travel.md": "Bob's travel policy: economy flights, hotels under 180 EUR.",
    "kb/team/glossary.md": "Ledger: the append-only table of billing events.",
    "docs/faq.md": "Public FAQ: install the client with pip.",
    "docs/archive/2023-plan.md": "Archived plan: shard the billing database by region.",
}


@pytest.fixture(scope="module")
def project(tmp_path_factory, real_embedder):  # type: ignore[no-untyped-def]
    """FILES indexed once for the tests that only search it; a test that writes or tampers takes `own_project`."""
    indexed = Project(tmp_path_factory.mktemp("search"), CountingEmbedder(real_embedder))
    indexed.write(FILES)
    indexed.index()
    yield indexed
    indexed.store.close()


@pytest.fixture
def own_project(make_project):
    project = make_project(FILES)
    project.index()
    return project


def run(project, question, mode="hybrid", k=8, **filters):
    return search(question, project.store, project.embedder, QueryFilters.build(**filters),
                  SearchOptions(mode=mode, k=k), project.settings.path_rules)


@pytest.mark.parametrize("mode", ["vector", "lexical", "hybrid"])
def test_modes_find_the_relevant_chunk_first(project, mode):
    out = run(project, "billing database PostgreSQL migration", mode=mode)
    assert out["mode"] == mode
    assert out["results"][0]["file_path"] == "kb/users/alice/2025-03-01-db.md"
    first = out["results"][0]
    assert first["final_rank"] == 1
    assert (first["vector_rank"] is not None) == (mode != "lexical")
    assert (first["lexical_rank"] is not None) == (mode != "vector")
    assert (first["fused_score"] is not None) == (mode == "hybrid")


def test_contract_fields(project):
    out = run(project, "billing")
    assert set(out) >= {"question", "k", "mode", "filters", "results"}
    assert set(out["filters"]) >= {"user_slug", "doc_types", "private_only", "public_only", "date_from", "date_to",
                                   "include_archive", "prefix_backstop", "tags"}
    row = out["results"][0]
    assert set(row) >= {"chunk_id", "doc_id", "file_path", "snippet", "doc_type", "user_slug", "is_private",
                        "created_at", "vector_rank", "lexical_rank", "fused_score", "final_rank", "score",
                        "token_estimate", "char_start", "char_end", "start_word", "end_word"}


def test_safe_defaults_private_only_and_no_archive(project):
    paths = {r["file_path"] for r in run(project, "billing database install pip")["results"]}
    assert "docs/faq.md" not in paths and "docs/archive/2023-plan.md" not in paths
    public = {r["file_path"] for r in run(project, "billing install", public_only=True)["results"]}
    assert public == {"docs/faq.md"}
    with_archive = {r["file_path"] for r in run(project, "billing", public_only=True, include_archive=True)["results"]}
    assert "docs/archive/2023-plan.md" in with_archive


def test_user_doc_type_date_and_tag_filters(project):
    assert {r["user_slug"] for r in run(project, "billing travel cat", user_slug="bob")["results"]} == {"bob"}
    assert {r["doc_type"] for r in run(project, "billing", doc_types=["kb"])["results"]} == {"kb"}
    dated = run(project, "billing cat travel", date_from="2025-01-01", date_to="2025-03-01")["results"]
    assert {r["file_path"] for r in dated} == {"kb/users/alice/2025-03-01-db.md"}
    tagged = run(project, "cat billing", tags=["home"])["results"]
    assert [r["file_path"] for r in tagged] == ["kb/users/alice/2024-01-05-pets.md"]


def test_filtered_vector_query_returns_k_when_k_exist(make_project):
    files = {f"kb/users/u{i % 20}/n{i}.md": f"note {i} about topic {i % 7} and item {i}" for i in range(200)}
    project = make_project(files)
    project.index()
    out = run(project, "note about topic", mode="vector", k=10, user_slug="u3")
    assert len(out["results"]) == 10 and {r["user_slug"] for r in out["results"]} == {"u3"}


@pytest.mark.parametrize(
    "query",
    ['"', "'", "AND", "OR NOT", "NEAR(a b)", "*", "^", "text:", "(((", "\\", "'; DROP TABLE chunks; --",
     '" OR 1=1 --', "col:*", "\x00", "🙂", "a" * 4000],
)
def test_fts_injection_never_errors_and_never_escapes_filters(project, query):
    out = run(project, query, mode="lexical", user_slug="bob")
    assert all(r["user_slug"] == "bob" for r in out["results"])
    assert project.store.stats()["chunks"] == 6  # nothing was dropped


def test_operator_only_query_is_empty_not_error(project):
    assert run(project, '*** ( ) ^ " :', mode="lexical")["results"] == []


@pytest.mark.parametrize(
    ("kwargs", "options"),
    [({"date_from": "2025-13-01"}, {}), ({"user_slug": "../bob"}, {}), ({"doc_types": ["secret"]}, {}),
     ({"date_from": "2025-02-01", "date_to": "2025-01-01"}, {}), ({}, {"k": 0}), ({}, {"mode": "magic"})],
)
def test_malformed_queries_are_clear_errors(project, kwargs, options):
    with pytest.raises(InvalidQueryError):
        search("billing", project.store, project.embedder, QueryFilters.build(**kwargs), SearchOptions(**options))


def test_empty_and_oversized_question(project):
    for question in ("", "   ", "x" * 5000):
        with pytest.raises(InvalidQueryError):
            run(project, question)


def test_path_backstop_drops_a_row_whose_stored_scope_lies(own_project):
    # Tamper with the index: claim one of alice's chunks belongs to bob. SQL would now admit it for bob;
    # the path backstop must still refuse it.
    own_project.store._db.execute(
        "UPDATE chunks SET user_slug = 'bob' WHERE file_path = 'kb/users/alice/2025-03-01-db.md'"
    )
    for mode in ("vector", "lexical", "hybrid"):
        out = run(own_project, "billing database PostgreSQL", mode=mode, user_slug="bob")
        paths = {r["file_path"] for r in out["results"]}
        assert "kb/users/alice/2025-03-01-db.md" not in paths


def test_vector_caches_and_lexical_index_see_writes_from_this_and_other_connections(own_project):
    from ragstead.indexing.build import index_roots
    from ragstead.stores.sqlite import SqliteStore

    def seen(path: str) -> bool:
        """Whether vector and lexical search both see `path` (it is an error if only one does)."""
        outs = [run(own_project, "submarine periscope", mode=m, k=20, user_slug="bob") for m in ("vector", "lexical")]
        found = [any(r["file_path"] == path for r in out["results"]) for out in outs]
        assert found[0] == found[1], f"vector sees {path}: {found[0]}, lexical: {found[1]}"
        return found[0]

    assert not seen("kb/users/bob/sub.md")  # warms the matrix, the eligible-row cache and the lexical reader
    own_project.write({"kb/users/bob/sub.md": "Bob's notes on the submarine periscope."})
    own_project.index()  # same connection
    assert seen("kb/users/bob/sub.md")
    own_project.write({"kb/users/bob/sub2.md": "More submarine periscope notes by Bob."})
    other = SqliteStore(own_project.settings.db_file)  # a second writer, like another process
    index_roots(own_project.settings.indexing(), other, own_project.embedder, ("kb",))
    other.close()
    assert seen("kb/users/bob/sub2.md")
    (own_project.root / "kb/users/bob/sub.md").unlink()
    other = SqliteStore(own_project.settings.db_file)
    index_roots(own_project.settings.indexing(), other, own_project.embedder, ("kb",))
    other.close()
    assert not seen("kb/users/bob/sub.md")


def test_lexical_filter_clauses_admit_exactly_what_the_sql_filter_admits(project):
    """The lexical index filters inside its own query; on every filter combo it must admit the SQL WHERE's rows."""
    import itertools

    db = project.store._db
    dates = [(None, None), ("2025-01-01", None), (None, "2025-03-01"), ("2025-03-01", "2025-03-01"),
             ("2024-01-06", "2025-04-01")]
    non_empty = 0
    for user, types, public, archive, (start, end), tags in itertools.product(
        [None, "alice", "bob", "nobody"], [(), ("user_kb",), ("kb", "docs"), ("archive",)], [False, True],
        [False, True], dates, [(), ("home",), ("home", "none")],
    ):
        f = QueryFilters.build(user_slug=user, doc_types=types, public_only=public, include_archive=archive,
                               date_from=start, date_to=end, tags=tags)
        where, params = f.to_sql("c")
        by_sql = {r[0] for r in db.execute(f"SELECT c.id FROM chunks c WHERE {where}", params)}
        assert project.store._lexical.keys_in_scope(f) == by_sql, (user, types, public, archive, start, end, tags)
        non_empty += bool(by_sql)
    assert non_empty > 50  # the combos really select rows, so agreement is not agreement on nothing


def test_slug_tokens_do_not_collide_for_lookalike_users(make_project):
    files = {f"kb/users/{u}/n.md": f"note of {u} about rivers" for u in ("ann", "ann-b", "ann.b", "Ann", "ann_b")}
    project = make_project(files)
    project.index()
    for user in ("ann", "ann-b", "ann.b", "Ann", "ann_b"):
        out = run(project, "rivers note", mode="lexical", user_slug=user)
        assert [r["file_path"] for r in out["results"]] == [f"kb/users/{user}/n.md"]


def test_rows_past_the_first_page_are_read_when_the_backstop_thins_it_out(make_project):
    # 40 of alice's notes claim (in the index) to be bob's and outrank bob's own 5 notes. The first page of
    # rows read (32 for k 4) is all tampered rows; the backstop drops them, and the later pages must still
    # deliver bob's notes.
    files = {f"kb/users/alice/n{i}.md": f"Harbour crane maintenance log {i}: the crane was serviced."
             for i in range(40)}
    files |= {f"kb/users/bob/b{i}.md": f"Lunch menu {i}: soup, bread and cheese." for i in range(5)}
    project = make_project(files)
    project.index()
    project.store._db.execute("UPDATE chunks SET user_slug = 'bob' WHERE file_path LIKE 'kb/users/alice/%'")
    out = search("harbour crane maintenance log", project.store, project.embedder, QueryFilters.build(user_slug="bob"),
                 SearchOptions(mode="hybrid", k=4, top_k_vector=100), project.settings.path_rules)
    assert [r["file_path"].split("/")[2] for r in out["results"]] == ["bob"] * 4
