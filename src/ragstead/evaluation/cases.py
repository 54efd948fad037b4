"""Evaluation inputs: JSONL cases and BEIR folders (corpus.jsonl, queries.jsonl, qrels/<split>.tsv)."""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from pathlib import Path

from ragstead.errors import RagsteadError, require_extra

RELEVANCE_KEYS = ("relevant_doc_ids", "relevant_paths", "relevant_urls")


@dataclass
class EvalCase:
    """One query and its graded relevance: key (path / doc id / corpus id) -> gain."""

    qid: str
    query: str
    relevant: dict[str, float]
    key: str = "file_path"  # which result field the relevance keys refer to
    notes: str | None = None


@dataclass
class BeirCorpus:
    corpus: dict[str, tuple[str, str]] = field(default_factory=dict)  # id -> (title, text)
    cases: list[EvalCase] = field(default_factory=list)


def load_jsonl_cases(path: Path) -> list[EvalCase]:
    """`{"query", "relevant_doc_ids" | "relevant_paths" | "relevant_urls", "notes"?}` per line."""
    cases: list[EvalCase] = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise RagsteadError(f"cannot read eval cases {path}: {exc}") from exc
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise RagsteadError(f"{path}:{number}: not JSON ({exc.msg})") from exc
        found = [k for k in RELEVANCE_KEYS if data.get(k)]
        if not isinstance(data, dict) or not isinstance(data.get("query"), str) or len(found) != 1:
            raise RagsteadError(f"{path}:{number}: needs a string 'query' and exactly one of {RELEVANCE_KEYS}")
        values = data[found[0]]
        values = [str(v) for v in ([values] if isinstance(values, str) else values)]
        # URLs are judged against an ingested document's source URL (its file path is an archive name), so a URL
        # as typed to `ingest` (tracking parameters, a fragment) is keyed as ingest keyed it.
        key = {"relevant_doc_ids": "doc_id", "relevant_urls": "source_url"}.get(found[0], "file_path")
        if key == "source_url":
            values = [_as_ingested(v) for v in values]
        cases.append(EvalCase(str(data.get("id", number)), data["query"], dict.fromkeys(values, 1.0), key,
                              data.get("notes")))
    if not cases:
        raise RagsteadError(f"{path}: no eval cases")
    return cases


def _as_ingested(value: str) -> str:
    """The source URL ingest stores for `value` (ingest/urls.py: normalised, without tracking parameters or
    fragment; a video or post at its canonical address); a file path, or what is not an http(s) URL, as given."""
    if value.split("://", 1)[0].lower() not in ("http", "https") or "://" not in value:
        return value
    require_extra("ingest")  # keyed as ingest keys it, with ingest's URL rules (url-normalize, the video ids)
    from ragstead.ingest.base import SourceError
    from ragstead.ingest.urls import parse_source

    try:
        return parse_source(value).url
    except SourceError:
        return value


def load_beir(folder: Path, split: str = "test") -> BeirCorpus:
    """Read a BEIR dataset; only queries judged in `qrels/<split>.tsv` become cases (graded gains kept)."""
    corpus_file, queries_file = folder / "corpus.jsonl", folder / "queries.jsonl"
    qrels_file = folder / "qrels" / f"{split}.tsv"
    for needed in (corpus_file, queries_file, qrels_file):
        if not needed.exists():
            raise RagsteadError(f"BEIR folder {folder} has no {needed.relative_to(folder)}")
    out = BeirCorpus()
    with corpus_file.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                doc = json.loads(line)
                out.corpus[str(doc["_id"])] = (doc.get("title") or "", doc.get("text") or "")
    queries: dict[str, str] = {}
    with queries_file.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                q = json.loads(line)
                queries[str(q["_id"])] = q["text"]
    qrels: dict[str, dict[str, float]] = {}
    with qrels_file.open(encoding="utf-8") as handle:
        reader = csv.reader(handle, delimiter="\t")
        for row in reader:
            if len(row) < 3 or row[0] == "query-id":
                continue
            qrels.setdefault(row[0], {})[row[1]] = float(row[2])
    for qid, rels in qrels.items():
        if qid not in queries:
            raise RagsteadError(f"{qrels_file}: query {qid} is not in queries.jsonl")
        out.cases.append(EvalCase(qid, queries[qid], rels, key="corpus_id"))
    return out
