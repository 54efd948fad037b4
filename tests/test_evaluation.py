import json
import math

import pytest

from helpers.cli_runner import run_ragstead
from ragstead.errors import RagsteadError
from ragstead.evaluation.cases import load_beir, load_jsonl_cases
from ragstead.evaluation.metrics import (
    hit_rate_at_k,
    mrr_at_k,
    ndcg_at_k,
    rank_by_score,
    recall_at_k,
    summarize,
)


def test_binary_metrics_hand_computed():
    ranked = ["d3", "d1", "d7", "d2"]
    qrels = {"d1": 1, "d2": 1, "d9": 1}
    assert recall_at_k(ranked, qrels, 1) == 0
    assert recall_at_k(ranked, qrels, 2) == pytest.approx(1 / 3)
    assert recall_at_k(ranked, qrels, 4) == pytest.approx(2 / 3)
    assert mrr_at_k(ranked, qrels, 1) == 0 and mrr_at_k(ranked, qrels, 10) == 0.5
    assert hit_rate_at_k(ranked, qrels, 1) == 0 and hit_rate_at_k(ranked, qrels, 2) == 1
    # DCG = 1/log2(3) + 1/log2(5); IDCG (3 relevant) = 1 + 1/log2(3) + 1/log2(4)
    expected = (1 / math.log2(3) + 1 / math.log2(5)) / (1 + 1 / math.log2(3) + 0.5)
    assert ndcg_at_k(ranked, qrels, 10) == pytest.approx(expected)


def test_graded_ndcg_hand_computed():
    ranked = ["a", "b", "c"]
    qrels = {"a": 1, "b": 0, "c": 3, "z": 2}
    dcg = 1 / math.log2(2) + 3 / math.log2(4)
    idcg = 3 / math.log2(2) + 2 / math.log2(3) + 1 / math.log2(4)
    assert ndcg_at_k(ranked, qrels, 10) == pytest.approx(dcg / idcg)
    assert ndcg_at_k(["c", "z", "a"], qrels, 10) == pytest.approx(1.0)
    assert ndcg_at_k(["b"], {"b": 0}, 10) == 0.0  # gain 0 is not relevant


def test_ties_are_broken_by_key_deterministically():
    assert rank_by_score({"b": 1.0, "a": 1.0, "c": 2.0}) == ["c", "a", "b"]
    # the tie decides the metric, so the order must never depend on insertion order
    ranked = rank_by_score({"x": 0.5, "rel": 0.5})
    assert mrr_at_k(ranked, {"rel": 1}, 10) == 1.0
    assert rank_by_score({"rel": 0.5, "x": 0.5}) == ranked


def test_summarize_means_and_missing_runs():
    qrels = {"q1": {"a": 1}, "q2": {"b": 1}}
    out = summarize({"q1": ["a"]}, qrels, [1, 10])
    assert out["recall@1"] == 0.5 and out["mrr@10"] == 0.5 and out["ndcg@10"] == 0.5


def make_beir(folder):
    docs = {
        "d1": ("Aspirin", "Aspirin reduces the risk of heart attack in adults."),
        "d2": ("Vitamin D", "Vitamin D deficiency is linked to weaker bones."),
        "d3": ("Sleep", "Short sleep duration raises cortisol levels."),
        "d4": ("Coffee", "Coffee consumption is associated with lower liver disease risk."),
    }
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text(
        "\n".join(json.dumps({"_id": k, "title": t, "text": x}) for k, (t, x) in docs.items())
    )
    queries = {"q1": "does aspirin prevent heart attacks", "q2": "bone strength and vitamin D",
               "q3": "liver health of coffee drinkers", "q9": "unjudged query"}
    (folder / "queries.jsonl").write_text("\n".join(json.dumps({"_id": k, "text": v}) for k, v in queries.items()))
    (folder / "qrels/test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t2\nq3\td4\t1\n")


def test_beir_loader(tmp_path):
    make_beir(tmp_path)
    data = load_beir(tmp_path, "test")
    assert len(data.corpus) == 4 and [c.qid for c in data.cases] == ["q1", "q2", "q3"]
    assert data.cases[1].relevant == {"d2": 2.0}
    with pytest.raises(RagsteadError, match=r"qrels/train\.tsv"):
        load_beir(tmp_path, "train")


@pytest.mark.parametrize(
    "line", ["not json", '{"query": "x"}', '{"query": 1, "relevant_paths": ["a"]}',
             '{"query": "x", "relevant_paths": ["a"], "relevant_doc_ids": ["b"]}'],
)
def test_bad_jsonl_cases_are_clear_errors(tmp_path, line):
    path = tmp_path / "cases.jsonl"
    path.write_text(line + "\n")
    with pytest.raises(RagsteadError):
        load_jsonl_cases(path)


def run_cli(*args):
    return run_ragstead(*args)


def test_eval_beir_end_to_end_all_modes(tmp_path):
    make_beir(tmp_path / "beir")
    report_path = tmp_path / "report.json"
    out = run_cli("eval", "--beir", str(tmp_path / "beir"), "--modes", "vector,lexical,hybrid", "--k", "1,3",
                  "--report-json", str(report_path), "--root", str(tmp_path), "--index-db", str(tmp_path / "e.db"),
                  "--rerank")
    assert out.returncode == 0, out.stderr
    assert "ndcg@10" in out.stdout and "hybrid" in out.stdout
    report = json.loads(report_path.read_text())
    # hybrid is reported under both fusions (the configured one is plain "hybrid"), and re-ranked
    assert report["n_queries"] == 3
    assert set(report["modes"]) == {"vector", "lexical", "hybrid", "hybrid (rrf)", "hybrid (no feedback)",
                                    "hybrid+rerank"}
    assert report["settings"]["fusion"] == "convex" and report["settings"]["reranker"].startswith("sentence-maxsim")
    assert report["modes"]["vector"]["hit_rate@3"] == 1.0  # tiny corpus: every answer is found
    assert report["run"]["corpus_docs"] == 4 and report["run"]["chunks_embedded"] == 4
    assert report["settings"]["aggregation"].startswith("document rank")
    # a second run reuses the kept index: nothing is embedded again
    again = run_cli("eval", "--beir", str(tmp_path / "beir"), "--modes", "lexical", "--report-json",
                    str(report_path), "--root", str(tmp_path), "--index-db", str(tmp_path / "e.db"))
    assert again.returncode == 0 and json.loads(report_path.read_text())["run"]["chunks_embedded"] == 0


def test_eval_jsonl_cases_against_project_index(tmp_path):
    (tmp_path / "kb/users/ann").mkdir(parents=True)
    (tmp_path / "kb/users/ann/tea.md").write_text("Green tea contains catechins and a little caffeine.")
    (tmp_path / "kb/users/ann/cars.md").write_text("Electric cars need charging stations on highways.")
    assert run_cli("index", "--root", str(tmp_path), "--quiet").returncode == 0
    cases = tmp_path / "cases.jsonl"
    cases.write_text(json.dumps({"query": "what is in green tea", "relevant_paths": ["kb/users/ann/tea.md"]}) + "\n"
                     + json.dumps({"query": "charging electric vehicles", "relevant_paths": "kb/users/ann/cars.md"}))
    report_path = tmp_path / "r.json"
    out = run_cli("eval", "--cases", str(cases), "--root", str(tmp_path), "--user", "ann", "--k", "1",
                  "--report-json", str(report_path), "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(report_path.read_text())["modes"]["hybrid"]["recall@1"] == 1.0
    assert json.loads(out.stdout) == json.loads(report_path.read_text())  # --json: the report on stdout
    # another user's scope finds nothing: the eval respects filters too
    run_cli("eval", "--cases", str(cases), "--root", str(tmp_path), "--user", "bob", "--k", "1",
            "--report-json", str(report_path))
    assert json.loads(report_path.read_text())["modes"]["hybrid"]["recall@1"] == 0.0


def test_eval_argument_errors(tmp_path):
    beir = ["eval", "--beir", str(tmp_path)]
    for args in (["eval"], ["eval", "--cases", "x", "--beir", "y"], [*beir, "--modes", "magic"],
                 [*beir, "--k", "a,b"], beir):
        out = run_cli(*args, "--root", str(tmp_path))
        assert out.returncode == 2 and out.stderr.startswith("error:"), args


def test_relevant_urls_are_judged_against_the_source_url(tmp_path):
    from types import SimpleNamespace

    from ragstead.evaluation.runner import _doc_key

    cases = tmp_path / "cases.jsonl"
    cases.write_text(json.dumps({"query": "q", "relevant_urls": ["https://example.com/a"]}))
    [case] = load_jsonl_cases(cases)
    page = SimpleNamespace(source_url="https://example.com/a", file_path="kb/users/me/ingested/web/a.md")
    note = SimpleNamespace(source_url=None, file_path="notes/a.md")
    assert _doc_key(page, case.key) in case.relevant  # an ingested page: its URL, not its archive path
    assert _doc_key(note, case.key) == "notes/a.md"


def test_relevant_urls_as_typed_to_ingest_are_keyed_as_ingest_keys_them(tmp_path):
    from types import SimpleNamespace

    from ragstead.evaluation.runner import _doc_key
    from ragstead.ingest.urls import parse_source

    typed = ["https://Example.com/a?utm_source=news&utm_medium=mail", "https://example.com/b/#top",
             "https://example.com/c?id=7&fbclid=IwAR0x", "notes/d.md"]
    cases = tmp_path / "cases.jsonl"
    cases.write_text(json.dumps({"query": "q", "relevant_urls": typed}))
    [case] = load_jsonl_cases(cases)
    assert set(case.relevant) == {"https://example.com/a", "https://example.com/b", "https://example.com/c?id=7",
                                  "notes/d.md"}
    for url in typed[:3]:  # the page ingest archived from each, under the source URL it stored
        page = SimpleNamespace(source_url=parse_source(url).url, file_path="kb/users/me/ingested/web/x.md")
        assert _doc_key(page, case.key) in case.relevant, url
