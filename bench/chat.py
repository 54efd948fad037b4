"""`python -m bench chat [--split fit|heldout]`: are follow-up questions answered right in a conversation, against
the same follow-ups asked alone, and against first questions? And does any turn cross its scope?

The set: tests/data/conversations (39 three-turn conversations over the two notes sets, each turn with the fact a
right answer holds; written and committed before the rewriter). Both notes sets go into one team-layout project,
each as one user's private notes (tests/data/notes as `me`, tests/data/notes_fresh as `fresh`), so every turn is
asked in its user's scope beside another user's documents: a citation of the other user's folder is a crossing.

Each conversation is asked turn by turn through `kb.chat` (extractive, offline: the offline follow-up rule), and
each later turn again alone through `kb.ask`. A turn is right when it is answered (not refused) and its answer holds
the fact (case-insensitive, whitespace collapsed, as `bench answers` judges the notes set). Rows: first questions,
follow-ups in the conversation, the same follow-ups alone, per split; then per shape of follow-up (pronoun,
ellipsis, implicit, new subject, switch), the new-subject rows saying whether carrying polluted a question that
named its own subject.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from bench.answers import fact_in
from bench.common import Timer, write_results

DATA = Path(__file__).resolve().parents[1] / "tests" / "data"
CONVERSATIONS = DATA / "conversations" / "conversations.jsonl"
USERS = {"notes": "me", "notes_fresh": "fresh"}  # which user's private notes each set becomes
SHAPES = ("pronoun", "ellipsis", "implicit", "new_subject", "switch")


def load(split: str | None = None) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in CONVERSATIONS.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [r for r in rows if split in (None, r["split"])]


def project(root: Path, embedder: Any) -> Any:
    """A team-layout project: each notes set one user's private notes, indexed."""
    import ragstead

    ragstead.init(root, layout="team", owner="me")
    for name, user in USERS.items():
        shutil.copytree(DATA / name / "notes", root / "kb" / "users" / user / "notes")
    kb = ragstead.open(root, embedder=embedder)
    kb.index()
    return kb


def _right(refused: bool, text: str, fact: str) -> bool:
    return not refused and fact_in(text, fact)


def run(kb: Any, conversations: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """One record per turn: right in the conversation, right alone (later turns), crossings, the rewrite."""
    records = []
    for c in conversations:
        user = USERS[c["set"]]
        own = f"kb/users/{user}/"
        conversation = None
        for i, turn in enumerate(c["turns"]):
            conversation = kb.chat(turn["question"], conversation=conversation, user=user, extractive=True)
            last = conversation.last
            record = {"id": f"{c['id']}.{i + 1}", "split": c["split"], "shape": turn["shape"], "turn": i + 1,
                      "question": turn["question"], "rewritten": last.rewritten, "method": last.rewrite.method,
                      "right": _right(last.refused, last.text, turn["fact"]), "answer": last.text,
                      "crossings": [s.source for s in last.sources if not s.source.startswith(own)]}
            if i:
                alone = kb.ask(turn["question"], user=user, extractive=True)
                record["right_alone"] = _right(alone.refused, alone.text, turn["fact"])
                record["crossings"] += [c.source for c in alone.citations if not c.source.startswith(own)]
            records.append(record)
    return records


def _share(records: list[dict[str, Any]], key: str) -> str:
    if not records:
        return "-"
    right = sum(r[key] for r in records)
    return f"{right / len(records):.1%} ({right}/{len(records)})"


def table(records: list[dict[str, Any]], splits: tuple[str, ...]) -> list[list[str]]:
    rows = [["split", "turns", "n", "right in the conversation", "right asked alone"]]
    for split in splits:
        chosen = [r for r in records if r["split"] == split]
        first = [r for r in chosen if r["turn"] == 1]
        later = [r for r in chosen if r["turn"] > 1]
        rows.append([split, "first questions", str(len(first)), _share(first, "right"), _share(first, "right")])
        rows.append([split, "follow-ups", str(len(later)), _share(later, "right"), _share(later, "right_alone")])
        for shape in SHAPES:
            these = [r for r in later if r["shape"] == shape]
            if these:
                rows.append([split, f"  {shape.replace('_', ' ')}", str(len(these)), _share(these, "right"),
                             _share(these, "right_alone")])
    crossings = sum(len(r["crossings"]) for r in records)
    rows.append(["all", "citations outside the turn's scope", str(len(records)), str(crossings), "-"])
    return rows


def main(split: str | None = None) -> None:
    from ragstead.embeddings import default_embedder

    conversations = load(split if split in ("fit", "heldout") else None)
    splits = tuple(s for s in ("fit", "heldout") if any(c["split"] == s for c in conversations))
    with tempfile.TemporaryDirectory() as tmp, Timer() as timer:
        kb = project(Path(tmp), default_embedder())
        try:
            records = run(kb, conversations)
        finally:
            kb.close()
    rows = table(records, splits)
    name = "chat" if len(splits) == 2 else f"chat-{splits[0]}"
    write_results(name, {"seconds": round(timer.seconds, 1), "records": records}, rows)


__all__ = ["load", "main", "project", "run", "table"]
