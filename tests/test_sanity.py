"""`ragstead sanity` / `make sanity`: the judged whole-flow report over the bundled sample."""

import json
from pathlib import Path

from helpers.cli_runner import run_ragstead
from helpers.project import OFFLINE_ENV
from ragstead.answer.base import REFUSAL
from ragstead.sanity import run_sanity

SAMPLE = Path(__file__).resolve().parents[1] / "examples" / "sample"


def test_sanity_passes_on_the_sample_and_leaves_it_untouched(real_embedder):
    before = sorted(p.relative_to(SAMPLE).as_posix() for p in SAMPLE.rglob("*") if "rag" not in p.parts)
    report = run_sanity(SAMPLE, real_embedder)
    after = sorted(p.relative_to(SAMPLE).as_posix() for p in SAMPLE.rglob("*") if "rag" not in p.parts)
    assert before == after and not any("memory" in p for p in after)
    failed = [c for c in report["checks"] if not c["passed"]]
    assert report["passed"] and not failed, failed
    names = {q["name"]: q for q in report["questions"]}
    assert names["refusal"]["answer"] == REFUSAL and names["privacy"]["citations"] == []
    assert report["memory"]["written"]["decision"]["target"] == "USER"
    assert report["memory"]["blocked"]["decision"]["should_write"] is False


def test_sanity_command_writes_the_report(tmp_path):
    out = tmp_path / "artifacts" / "sanity_output.json"
    result = run_ragstead("sanity", "--sample", str(SAMPLE), "--out", str(out), env=OFFLINE_ENV)
    assert result.returncode == 0, result.stderr
    report = json.loads(out.read_text())
    assert report["passed"] and {"questions", "memory", "checks", "index"} <= set(report)
    missing = run_ragstead("sanity", "--sample", str(tmp_path / "nope"), env=OFFLINE_ENV)
    assert missing.returncode == 2 and "does not look like the sample" in " ".join(missing.stderr.split())
