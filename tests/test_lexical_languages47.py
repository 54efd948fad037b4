"""Two languages on the lexical side (#47.1): a document detected as German is stemmed with the German stemmer, and a
query is analysed in each language the index holds, so a German question finds a German note by a stemmed form
("Abgabe" -> "Abgaben": English stemming keeps "abgaben", German cuts both to "abgab"). An index of English documents
is queried exactly as before. The language is kept in SQLite, so a rebuilt lexical index stems the same way."""

from __future__ import annotations

import sqlite3

import numpy as np

from helpers.library import search
from ragstead.filters import QueryFilters
from ragstead.retrieval.search import SearchOptions
from ragstead.stores.base import ChunkRecord, DocumentRecord, DocumentWrite
from ragstead.stores.lexical_index import LexicalIndex, LexicalRow
from ragstead.stores.sqlite import SqliteStore

GERMAN_NOTE = ("# Steuer\n\nDie Abgaben für das Finanzamt sind bis zum 31. Juli fällig. Die Belege liegen im "
               "grünen Ordner im Arbeitszimmer, sortiert nach Monaten.\n")
# Notes that hold the question's other words ("ist", "die") more often than the note that answers it.
OTHER_GERMAN_NOTES = {
    "kb/kita.md": "# Kita\n\nDie Kita ist ab 7 Uhr offen, die Abholung ist bis 16 Uhr. In den Ferien "
                  "ist sie zu.\n",
    "kb/muell.md": "# Müll\n\nDie graue Tonne ist jeden zweiten Donnerstag dran, die Biotonne ist montags.\n",
    "kb/arzt.md": "# Kinderarzt\n\nDie Praxis ist mittwochs nachmittags zu. Die Impfung ist im Heft.\n",
}
ENGLISH_NOTE = "# Running\n\nThe long run on Sunday went along the river; the knee held up well after the rest week.\n"


def lexical_paths(project, question):
    out = search(question, project.store, project.embedder, QueryFilters.build(), SearchOptions(mode="lexical", k=20),
                 project.settings.path_rules)
    return [r["file_path"] for r in out["results"]]


def test_a_german_question_finds_a_german_note_by_its_stem(make_project):
    project = make_project({"kb/steuer.md": GERMAN_NOTE, **OTHER_GERMAN_NOTES, "kb/laufen.md": ENGLISH_NOTE})
    project.index()
    assert lexical_paths(project, "Abgabe") == ["kb/steuer.md"]  # "Abgaben" in the note
    assert lexical_paths(project, "Wann ist die Abgabe?")[0] == "kb/steuer.md"
    assert lexical_paths(project, "Ordnern") == ["kb/steuer.md"]  # "Ordner"
    assert lexical_paths(project, "runs") == ["kb/laufen.md"]  # the English note is stemmed as English


def test_the_language_survives_a_rebuild_of_the_lexical_index(make_project):
    project = make_project({"kb/steuer.md": GERMAN_NOTE})
    project.index()
    project.store._lexical.acquire()
    try:
        project.store._rebuild_lexical()  # what crash repair and settle_lexical run, from SQLite alone
    finally:
        project.store._lexical.release()
    assert lexical_paths(project, "Abgabe") == ["kb/steuer.md"]


def row(key: int, text: str, language: str | None = None) -> LexicalRow:
    return LexicalRow(key, text, "note", True, None, None, (), language)


def built(rows: list[LexicalRow]) -> LexicalIndex:
    index = LexicalIndex(None)
    index.acquire()
    index.replace_all(1, iter(rows))
    index.release()
    return index


def test_english_rows_score_the_same_beside_a_german_one():
    english = [row(1, "one living cell divides"), row(2, "cells and cell walls"), row(3, "the wall of a house")]
    as_english = built([*english, row(4, "Die Zellen der Hauswand")])
    as_german = built([*english, row(4, "Die Zellen der Hauswand", "de")])
    assert as_english.languages() == [] and as_german.languages() == ["de"]
    assert as_german.analyze(["Zellen"], ["de"]) == ["zellen", "zell"]
    assert as_german.search(["cell", "walls"], QueryFilters(), 10) == as_english.search(["cell", "walls"],
                                                                                         QueryFilters(), 10)
    assert [key for key, _ in as_english.search(["Zelle"], QueryFilters(), 10)] == []
    assert [key for key, _ in as_german.search(["Zelle"], QueryFilters(), 10)] == [4]


def test_an_index_without_the_language_column_gets_it(tmp_path):
    path = tmp_path / "index.db"
    SqliteStore(path).close()
    db = sqlite3.connect(path)
    db.execute("ALTER TABLE documents DROP COLUMN language")  # an index written before #47.1
    db.commit()
    db.close()
    store = SqliteStore(path)
    try:
        document = DocumentRecord("d1", "kb/steuer.md", "kb", "h", 1, 0.0, "note", True, None, None, None, None)
        chunk = ChunkRecord("d1:0", 0, "Die Abgaben sind fällig", "t", 0, 4, 0, 23, None, None, 5)
        store.ensure_model("fake", 4)
        store.apply([DocumentWrite(document, [chunk], np.ones((1, 4), dtype=np.float32), language="de")], [], [])
        assert [key for key, _ in store.lexical_search(["Abgabe"], QueryFilters(), 5)]
        assert store._db.execute("SELECT language FROM documents").fetchone() == ("de",)
    finally:
        store.close()
