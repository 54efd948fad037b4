"""`ragstead sanity` (`make sanity`): the whole flow on the bundled sample, judged, in one JSON file.

It copies the sample to a scratch folder (the sample in the repo is never modified), indexes it,
asks a fixed set of questions with the offline extractive answerer (so the output is deterministic),
runs a refusal case, a cross-user privacy probe and two memory decisions (one written, indexed and
then found by `ask`; one blocked for PII), and checks every promise on the way: answers cite only
retrieved chunks inside the asker's scope, the refusal is the exact sentence, the secret is not
written anywhere. The report lists every check; the command fails if one fails.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragstead.answer.base import REFUSAL
from ragstead.knowledge_base import open as open_kb

if TYPE_CHECKING:
    from ragstead import Embedder

ROOTS = ("kb", "artifacts", "docs")


@dataclass(frozen=True)
class Case:
    """A fixed question, whose scope asks it, and what a correct answer must contain and cite."""

    name: str
    question: str
    user: str | None
    public_only: bool
    must_contain: str  # a fact the answer must state ("" for refusals)
    must_cite: str  # a source path the citations must include ("" for refusals)


CASES = (
    Case("decision", "What did we decide about the billing database?", "alice", False, "PostgreSQL 16",
         "kb/users/alice/2025-03-14-database-decision.md"),
    Case("standup", "What caused the search latency regression?", "alice", False, "missing index",
         "kb/users/alice/standup-notes.txt"),
    Case("public", "Which databases does the open-source edition support?", None, True, "SQLite",
         "docs/public-faq.md"),
    Case("refusal", "What is the best pancake recipe without eggs?", "alice", False, "", ""),
    # Privacy probe: bob's travel policy exists in the index, alice must not get it.
    Case("privacy", "What is the hotel budget per night in the travel policy?", "alice", False, "", ""),
)
MEMORY_FACT = "I prefer the CLI over the web UI for everyday work."
MEMORY_QUESTION = "Do I prefer the CLI or the web UI?"
MEMORY_SECRET = "Remember my login: alice@example.com with password hunter2-Secret!"


def _copy_sample(sample: Path, scratch: Path) -> Path:
    root = scratch / "sample"
    shutil.copytree(sample, root, ignore=shutil.ignore_patterns("rag", ".*"))
    return root


def _in_scope(source: str, user: str | None, public_only: bool) -> bool:
    # Written out here on purpose instead of calling QueryFilters.admits: a judge that reused the
    # code it judges could not catch a bug in it.
    if public_only:
        return source.startswith("docs/")
    return source.startswith((f"kb/users/{user}/", f"artifacts/dossiers/{user}/"))


def run_sanity(sample: Path, embedder: Embedder | None = None) -> dict[str, Any]:
    """Run the fixed flow over a scratch copy of `sample`; return the report (see module docstring)."""
    checks: list[dict[str, Any]] = []

    def check(name: str, passed: bool, detail: str = "") -> None:
        checks.append({"name": name, "passed": bool(passed), "detail": detail})

    with tempfile.TemporaryDirectory(prefix="ragstead-sanity-") as scratch, open_kb(
        _copy_sample(sample, Path(scratch)).resolve(), embedder=embedder, roots=ROOTS, store="", model=""
    ) as kb:
        indexed = kb.index().to_dict()
        failed = [s for s in indexed["skipped"] if not s["reason"].startswith("unsupported file type")]
        check("index: every supported file indexed, none failed", bool(indexed["added"]) and not failed,
              f"{len(indexed['added'])} indexed, {len(failed)} failed")

        def run(question: str, user: str | None, public_only: bool) -> dict[str, Any]:
            return kb.ask(question, user=user, public_only=public_only, mode="hybrid", k=8,
                          extractive=True).to_dict()

        questions = []
        for case in CASES:
            out = run(case.question, case.user, case.public_only)
            sources = [c["source"] for c in out["citations"]]
            questions.append({"name": case.name, "user": case.user, "public_only": case.public_only, **out})
            if case.must_contain:
                check(f"{case.name}: answered with the expected fact", not out["refused"]
                      and case.must_contain.lower() in out["answer"].lower(), out["answer"][:200])
                check(f"{case.name}: cites {case.must_cite}", case.must_cite in sources, ", ".join(sources))
            else:
                check(f"{case.name}: exact refusal, no citations", out["answer"] == REFUSAL and not sources,
                      out["answer"][:200])
            check(f"{case.name}: every citation inside the asker's scope",
                  all(_in_scope(s, case.user, case.public_only) for s in sources), ", ".join(sources))

        written = kb.remember(MEMORY_FACT, user="alice").to_dict()
        blocked = kb.remember(MEMORY_SECRET, user="alice").to_dict()
        recalled = run(MEMORY_QUESTION, "alice", False)
        leaked = run(MEMORY_QUESTION, "bob", False)
        memory_text = "".join(p.read_text(encoding="utf-8") for p in (kb.root / "kb/users/alice/memory").glob("*.md"))
        model = kb.embedder.name
        check("memory: a preference is written to USER_MEMORY.md and indexed",
              written["written"] and written["indexed"] and written["file"].endswith("USER_MEMORY.md"),
              written["note"])
        check("memory: ask finds the remembered preference",
              any(c["source"].endswith("USER_MEMORY.md") for c in recalled["citations"]), recalled["answer"][:200])
        check("memory: another user never sees it",
              not any("memory/" in c["source"] for c in leaked["citations"]), leaked["answer"][:200])
        check("memory: PII and secrets are refused and never written",
              not blocked["written"] and blocked["decision"]["summary"] == ""
              and "hunter2" not in memory_text and "alice@example.com" not in memory_text,
              blocked["note"])
    return {
        "sample": str(sample),
        "answerer": "extractive",
        "model": model,
        "index": indexed,
        "questions": questions,
        "memory": {"written": written, "blocked": blocked, "recall": recalled, "other_user": leaked},
        "checks": checks,
        "passed": all(c["passed"] for c in checks),
    }
