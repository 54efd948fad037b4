"""The lexical side of the embedded store: a tantivy BM25 index in a folder beside the SQLite file.

Filters are zero-scored clauses of the query; the index is derived from SQLite and records the SQLite
generation it reflects (docs/design.md, "Lexical search on tantivy").
"""

from __future__ import annotations

import contextlib
import os
import re
import time
import warnings
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import tantivy

from ragstead.errors import LexicalIndexBusyError, RagsteadError, RagsteadWarning
from ragstead.filters import QueryFilters
from ragstead.stores.permissions import make_private_folder, tighten

ANALYZER = "ragstead_en"
# Key 0 is never a chunk id (SQLite AUTOINCREMENT starts at 1): it names the generation marker.
MARKER_KEY = 0
WRITER_HEAP_BYTES = 64_000_000
# How long a write waits for another process's lexical write (or crash repair) to finish.
WRITER_WAIT_SECONDS = 300.0
_DAY = re.compile(r"^(\d{4})-(\d{2})-(\d{2})")


@dataclass(frozen=True)
class LexicalRow:
    """What the lexical index keeps of one chunk: its SQLite id, text and filter values."""

    key: int
    text: str
    doc_type: str
    is_private: bool
    user_slug: str | None
    created_at: str | None
    tags: tuple[str, ...]
    language: str | None = None  # the document's ISO 639-1 code as detected at index time; None: English analysis


# The languages a document is stemmed in other than English (#47.1): documents/language.py's codes that tantivy has a
# Snowball stemmer for. A document in any other language (or none detected) is analysed as English, as before.
STEMMERS = {"de": "german", "fr": "french", "es": "spanish", "it": "italian", "nl": "dutch", "pt": "portuguese",
            "sv": "swedish", "da": "danish", "no": "norwegian", "fi": "finnish", "hu": "hungarian", "ro": "romanian",
            "el": "greek", "tr": "turkish", "ru": "russian", "ar": "arabic"}


def text_analyzer(stemmer: str = "english") -> tantivy.TextAnalyzer:
    """The analyzer of indexed text and queries (also used to match query words in sentences); `stemmer` names
    tantivy's Snowball stemmer for a document in another language (STEMMERS)."""
    # Unicode-aware word split, lowercase, diacritics folded, English (Porter2) stemming. Stop words stay
    # in the index; queries drop them (docs/design.md, "Lexical analysis").
    return (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
        .filter(tantivy.Filter.remove_long(40))
        .filter(tantivy.Filter.lowercase())
        .filter(tantivy.Filter.ascii_fold())
        .filter(tantivy.Filter.stemmer(stemmer))
        .build()
    )


def _language_token(code: str) -> str:
    return f"lang:{code}"


def _schema() -> tantivy.Schema:
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("text", tokenizer_name=ANALYZER, index_option="freq")
    builder.add_text_field("scope", tokenizer_name="raw", index_option="basic")
    builder.add_text_field("tag", tokenizer_name="raw", index_option="basic")
    builder.add_integer_field("day", indexed=True, fast=True)
    builder.add_unsigned_field("key", indexed=True, fast=True)
    builder.add_unsigned_field("generation", fast=True)
    return builder.build()


def scope_tokens(doc_type: str, is_private: bool, user_slug: str | None) -> list[str]:
    """A chunk's privacy, doc type and user as exact (raw-tokenized) terms of the `scope` field.

    The kind prefix keeps values of different kinds apart; raw tokens are never split or stemmed, so
    look-alike slugs (`ann`, `ann-b`, `Ann`) stay distinct terms.
    """
    tokens = [_privacy_token(is_private), _doc_type_token(doc_type)]
    if user_slug:
        tokens.append(_user_token(user_slug))
    return tokens


def _privacy_token(is_private: bool) -> str:
    return f"private:{int(is_private)}"


def _doc_type_token(doc_type: str) -> str:
    return f"type:{doc_type}"


def _user_token(user_slug: str) -> str:
    return f"user:{user_slug}"


def day_number(created_at: str | None) -> int | None:
    """YYYYMMDD of an ISO timestamp; comparing it mirrors the SQL filter's string comparison on created_at."""
    match = _DAY.match(created_at or "")
    return int("".join(match.groups())) if match else None


class LexicalIndex:
    """A tantivy index of chunk text keyed by SQLite chunk id. `directory=None` keeps it in memory."""

    def __init__(self, directory: Path | None, analyzer: tantivy.TextAnalyzer | None = None) -> None:
        """`analyzer` replaces text_analyzer() for a scratch index (`bench lexical` compares analyzers); a
        store's index always uses the default, since the index and its queries must share one."""
        self.directory = directory
        self.schema = _schema()
        self._analyzer = analyzer or text_analyzer()
        self._stemmed: dict[str, tantivy.TextAnalyzer] = {}  # by language code, made when first needed
        try:
            self._open()
        except ValueError as exc:
            if directory is None:
                raise RagsteadError(f"cannot open the lexical index: {exc}") from exc
            # The lexical index is derived from SQLite: a damaged one is set aside and rebuilt, not fatal.
            aside = directory.with_name(f"{directory.name}.damaged-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}")
            with contextlib.suppress(FileNotFoundError):  # another process moved it first
                directory.rename(aside)
            warnings.warn(RagsteadWarning(
                f"the lexical index {directory} was damaged ({str(exc).splitlines()[0][:160]}); moved it to "
                f"{aside.name} and rebuilding it from the index"), stacklevel=2)
            try:
                self._open()
            except ValueError as again:
                raise RagsteadError(f"cannot open the lexical index {directory}: {again}") from again
        self._writer: tantivy.IndexWriter | None = None
        self._uncommitted = False

    def _open(self) -> None:
        directory = self.directory
        if directory is None:
            self._index = tantivy.Index(self.schema)
        else:
            make_private_folder(directory)  # 0700; tantivy's own files get the umask's mode: see release()
            if tantivy.Index.exists(str(directory)):
                self._index = tantivy.Index.open(str(directory))
            else:
                self._index = tantivy.Index(self.schema, str(directory))
                tighten([directory])  # its .tantivy-meta.lock
        self._index.register_tokenizer(ANALYZER, self._analyzer)
        self._index.reload()
        self.generation()  # reads the segments: a truncated or missing one fails here, not in a query

    # -- reading ----------------------------------------------------------------------------------

    def refresh(self) -> int | None:
        """Load the latest commit (another process may have written) and return its generation."""
        self._index.reload()
        return self.generation()

    def generation(self) -> int | None:
        """The generation recorded with the visible commit, or None for an index never written."""
        searcher = self._index.searcher()
        hits = searcher.search(tantivy.Query.term_query(self.schema, "key", MARKER_KEY), 1, count=False).hits
        if not hits:
            return None
        return int(searcher.fast_field_values("generation", [hits[0][1]])[0])

    def segments(self) -> int:
        """Segments in the visible commit (background merges keep this small)."""
        return int(self._index.searcher().num_segments)

    def count(self) -> int:
        """Chunks in the visible commit (the marker excluded)."""
        searcher = self._index.searcher()
        return searcher.num_docs - (1 if self.generation() is not None else 0)

    def _stemmed_analyzer(self, code: str) -> tantivy.TextAnalyzer:
        if code not in self._stemmed:
            self._stemmed[code] = text_analyzer(STEMMERS[code])
        return self._stemmed[code]

    def languages(self, searcher: tantivy.Searcher | None = None) -> list[str]:
        """The languages other than English whose documents the index holds stemmed in their own language."""
        searcher = searcher or self._index.searcher()
        return [code for code in STEMMERS if searcher.doc_freq("scope", _language_token(code))]

    def analyze(self, terms: list[str], languages: Iterable[str] = ()) -> list[str]:
        """Index-side tokens of query words, deduplicated ("cells" and "cell" are one term): the English analysis,
        then each of `languages`' (a German question finds "Abgaben" in a German note by "Abgabe": both "abgab")."""
        analyzers = [self._analyzer, *(self._stemmed_analyzer(code) for code in languages)]
        return list(dict.fromkeys(token for analyzer in analyzers for term in terms
                                  for token in analyzer.analyze(term)))

    def search(self, terms: list[str], filters: QueryFilters, k: int) -> list[tuple[int, float]]:
        """BM25 top k among the chunks `filters` admit: (chunk id, score), best first. The query words are analysed
        as English and, when the index holds documents stemmed in other languages, as each of those too: one field,
        so an index of English documents is queried exactly as before."""
        searcher = self._index.searcher()
        tokens = self.analyze(terms, self.languages(searcher))
        if not tokens or k <= 0:
            return []
        words = tantivy.Query.boolean_query(
            [(tantivy.Occur.Should, tantivy.Query.term_query(self.schema, "text", t)) for t in tokens]
        )
        query = tantivy.Query.boolean_query([(tantivy.Occur.Must, words), *self._filter_clauses(filters)])
        hits = searcher.search(query, k, count=False).hits
        if not hits:
            return []
        keys = searcher.fast_field_values("key", [address for _, address in hits])
        return [(int(key), float(score)) for (score, _), key in zip(hits, keys, strict=True)]

    def keys_in_scope(self, filters: QueryFilters) -> set[int]:
        """Every chunk id the filter clauses admit (for consistency checks and tests, not for queries)."""
        everything = tantivy.Query.range_query(self.schema, "key", tantivy.FieldType.Unsigned, MARKER_KEY + 1, None)
        query = tantivy.Query.boolean_query([(tantivy.Occur.Must, everything), *self._filter_clauses(filters)])
        searcher = self._index.searcher()
        limit = max(searcher.num_docs, 1)
        hits = searcher.search(query, limit, count=False).hits
        return {int(k) for k in searcher.fast_field_values("key", [a for _, a in hits])} if hits else set()

    def _filter_clauses(self, filters: QueryFilters) -> list[tuple[tantivy.Occur, tantivy.Query]]:
        """QueryFilters.to_sql as tantivy clauses that filter without adding to the score."""
        schema, must, must_not = self.schema, tantivy.Occur.Must, tantivy.Occur.MustNot

        def exact(field: str, values: Iterable[str]) -> tantivy.Query:
            return tantivy.Query.const_score_query(tantivy.Query.term_set_query(schema, field, list(values)), 0.0)

        # Privacy is "not the other side" (MUST_NOT): a MUST clause matching most of the corpus stops
        # block-max WAND from skipping (docs/design.md, "Lexical search on tantivy").
        other_side = exact("scope", [_privacy_token(filters.public_only)])
        if filters.archive_beside_private:  # the other side's archive chunks stay in
            other_side = tantivy.Query.boolean_query(
                [(must, other_side), (must_not, exact("scope", [_doc_type_token("archive")]))])
        clauses = [(must_not, other_side)]
        if filters.user_slug is not None:
            clauses.append((must, exact("scope", [_user_token(filters.user_slug)])))
        if filters.doc_types:
            clauses.append((must, exact("scope", [_doc_type_token(t) for t in filters.doc_types])))
        if not filters.wants_archive:
            clauses.append((must_not, exact("scope", [_doc_type_token("archive")])))
        if filters.date_from or filters.date_to:
            days = tantivy.Query.range_query(
                schema, "day", tantivy.FieldType.Integer, day_number(filters.date_from), day_number(filters.date_to)
            )
            clauses.append((must, tantivy.Query.const_score_query(days, 0.0)))
        if filters.tags:
            clauses.append((must, exact("tag", filters.tags)))
        return clauses

    # -- writing ----------------------------------------------------------------------------------

    def acquire(self, wait_seconds: float | None = None) -> None:
        """Take the writer lock (cross-process), waiting while another process holds it."""
        if self._writer is not None:
            return
        wait_seconds = WRITER_WAIT_SECONDS if wait_seconds is None else wait_seconds
        deadline = time.monotonic() + wait_seconds
        while True:
            try:
                self._writer = self._index.writer(heap_size=WRITER_HEAP_BYTES, num_threads=1)
                return
            except ValueError as exc:
                if "LockBusy" not in str(exc):
                    raise RagsteadError(f"cannot write the lexical index {self.directory}: {exc}") from exc
                if time.monotonic() >= deadline:
                    raise LexicalIndexBusyError(
                        f"another process has held the lexical index {self.directory} for {wait_seconds:.0f}s; "
                        "nothing was written, try again when it is done"
                    ) from exc
                time.sleep(0.05)

    def try_acquire(self) -> bool:
        """Take the writer lock if nobody holds it; never waits."""
        try:
            self.acquire(wait_seconds=0.0)
        except LexicalIndexBusyError:
            return False
        return True

    def release(self) -> None:
        """Finish background merges and drop the writer lock."""
        writer, self._writer = self._writer, None
        if writer is not None:
            if self._uncommitted:  # a write failed halfway: drop its partial changes, keep the commits
                writer.rollback()  # (only then: a rollback also cancels the merges the commit scheduled)
                self._uncommitted = False
            writer.wait_merging_threads()
            if self.directory is not None:  # commits and merges wrote segment and lock files: owner only
                tighten([self.directory])

    def write(self, generation: int, delete_keys: list[int], rows: list[LexicalRow]) -> None:
        """Apply one store write: delete chunk ids, add rows, record `generation`; one atomic commit."""
        writer = self._require_writer()
        keys = [*delete_keys, MARKER_KEY]
        writer.delete_documents_by_query(tantivy.Query.term_set_query(self.schema, "key", keys))
        self._add(writer, rows, generation)

    def replace_all(self, generation: int, rows: Iterator[LexicalRow]) -> None:
        """Rebuild from scratch (crash repair, `--rebuild`); one atomic commit."""
        writer = self._require_writer()
        writer.delete_all_documents()
        self._add(writer, rows, generation)

    def _require_writer(self) -> tantivy.IndexWriter:
        if self._writer is None:
            raise RuntimeError("LexicalIndex.acquire() must be called before writing")
        self._uncommitted = True
        return self._writer

    def _add(self, writer: tantivy.IndexWriter, rows: Iterable[LexicalRow], generation: int) -> None:
        for row in rows:
            doc = tantivy.Document()
            doc.add_unsigned("key", row.key)
            if row.language in STEMMERS:
                # One field for every language: a token's length, and so BM25's length norm, is the same whichever
                # stemmer cut it, and the document frequencies stay those of the whole index (docs/design.md,
                # "Lexical analysis per language").
                tokens = self._stemmed_analyzer(row.language).analyze(row.text)
                doc.add_pre_tokenized_text("text", tantivy.PreTokenizedString(
                    row.text, [tantivy.Token(token, n, 0, 0) for n, token in enumerate(tokens)]))
                doc.add_text("scope", _language_token(row.language))
            else:
                doc.add_text("text", row.text)
            for token in scope_tokens(row.doc_type, row.is_private, row.user_slug):
                doc.add_text("scope", token)
            for tag in row.tags:
                doc.add_text("tag", tag)
            day = day_number(row.created_at)
            if day is not None:
                doc.add_integer("day", day)
            writer.add_document(doc)
        marker = tantivy.Document()
        marker.add_unsigned("key", MARKER_KEY)
        marker.add_unsigned("generation", generation)
        writer.add_document(marker)
        writer.commit()
        self._uncommitted = False
        self._index.reload()
