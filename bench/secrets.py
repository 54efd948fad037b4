"""`python -m bench secrets`: the two measures of the secret detector (issue #50).

1. **Shapes**: tests/data/secrets_shapes (a fit and a held-out half, written before the detector). Each half is
   indexed in a scratch project with the default model; every question of expected.json is asked at every door
   (`query` as a table and as JSON, `ask` as text and JSON, `ls`, `tags`, `status`, `export`, the HTTP API's
   /v1/query, /v1/ask, /v1/chunks and /v1/documents, MCP's search, ask and get_document, and a remote LLM's
   prompt, caught by a stand-in transport). Counted: the values any door shows, and the questions whose file is
   still among the first five hits.
2. **False positives**: the chunks the index stores for SciFact (../shared/datasets/scifact), the notes sets
   (tests/data/notes*) and a generated sample of ordinary prose (recipes, meeting notes with times, invoices
   with amounts and IBANs, phone and order numbers), none of which holds a secret: how many the detector masks
   (a chunk whose text, section or title holds the mask).

Results: bench/results/secret_masking.json and .md; docs/privacy.md quotes them.
"""

from __future__ import annotations

import io
import json
import random
import re
import shutil
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.common import DEFAULT_SCIFACT, RESULTS

SHAPES = Path(__file__).resolve().parents[1] / "tests" / "data" / "secrets_shapes"
FOLDER = "kb/users/ana"  # one user's private notes: the API and MCP act as her
NOTES_SETS = sorted((Path(__file__).resolve().parents[1] / "tests" / "data").glob("notes*"))


# -- shown or not ------------------------------------------------------------------------------------------


def _patterns(secret: dict[str, Any]) -> list[re.Pattern[str]]:
    """What counts as showing a secret: the value (or a part of a split one) standing alone, not inside a longer
    word or number; for a phrase of words, any three of them in a row."""
    words = secret["value"].split()
    if len(words) >= 6:
        return [re.compile(r"(?<![\w])" + r"\W+".join(map(re.escape, words[i:i + 3])) + r"(?![\w])")
                for i in range(len(words) - 2)]
    return [re.compile(r"(?<![\w.])" + r"\s+".join(map(re.escape, part.split())) + r"(?![\w]|[.,]\d)")
            for part in secret.get("parts", [secret["value"]])]


def _strings(value: Any) -> Iterator[str]:
    """Every string in a JSON value (numbers are offsets and scores, never a shown value)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)


def _shown(output: str | Any, patterns: list[re.Pattern[str]]) -> bool:
    texts = [output] if isinstance(output, str) else list(_strings(output))
    return any(p.search(text) for p in patterns for text in texts)


# -- the doors ---------------------------------------------------------------------------------------------


class _Prompts:
    """A remote OpenAI-compatible endpoint as an httpx transport: keeps each prompt, answers "[1]"."""

    def __init__(self) -> None:
        import httpx

        self.bodies: list[str] = []
        self.transport = httpx.MockTransport(self.handle)

    def handle(self, request: Any) -> Any:
        import httpx

        self.bodies.append(request.content.decode("utf-8", "replace"))
        event = {"choices": [{"index": 0, "delta": {"content": "See [1]."}}]}
        return httpx.Response(200, headers={"content-type": "text/event-stream"},
                              content=f"data: {json.dumps(event)}\n\ndata: [DONE]\n\n".encode())


def _project(half: str, root: Path) -> Path:
    (root / FOLDER).mkdir(parents=True)
    for path in sorted((SHAPES / half).iterdir()):
        shutil.copy(path, root / FOLDER / path.name)
    return root


def _once_per_half(root: Path, runner: Any, app: Any) -> dict[str, Any]:
    """The outputs that do not depend on a question: index, ls, tags, status, export."""
    at = ["--root", str(root)]
    outputs: dict[str, Any] = {"index": runner.invoke(app, ["index", *at]).output}
    for name, command in (("ls", ["ls"]), ("ls --json", ["ls", "--json"]), ("tags", ["tags"]),
                          ("tags --json", ["tags", "--json"]), ("status", ["status"])):
        outputs[name] = runner.invoke(app, [*command, *at]).output
    snapshot = root / "snapshot.ragsnap"
    outputs["export (command)"] = runner.invoke(app, ["export", str(snapshot), *at]).output
    with zipfile.ZipFile(snapshot) as archive:
        outputs["export (file)"] = "\n".join(archive.read(name).decode("utf-8", "replace")
                                             for name in archive.namelist() if not name.endswith(".f32"))
    return outputs


def _per_question(question: str, root: Path, runner: Any, app: Any, kb: Any, client: Any, mcp: Any,
                  prompts: _Prompts) -> tuple[dict[str, Any], list[str]]:
    """Every door's answer to one question, and the files of the first five hits."""
    from ragstead.mcp_server import AskArgs, GetDocumentArgs, SearchArgs

    at = ["--root", str(root)]
    found = kb.search(question).to_dict(include_text=True)
    outputs: dict[str, Any] = {
        "query": runner.invoke(app, ["query", question, *at]).output,
        "query --json": json.loads(runner.invoke(app, ["query", question, "--json", *at]).stdout),
        "ask": runner.invoke(app, ["ask", question, "--extractive", *at]).output,
        "ask --json": json.loads(runner.invoke(app, ["ask", question, "--extractive", "--json", *at]).stdout),
        "/v1/query": client.post("/v1/query", json={"query": question}).json(),
        "/v1/ask": client.post("/v1/ask", json={"query": question}).json(),
        "/v1/ask stream": client.post("/v1/ask", json={"query": question, "stream": True}).text,
        "mcp search": mcp._search(SearchArgs(query=question)),
        "mcp ask": mcp._ask(AskArgs(question=question, extractive=True)),
    }
    for hit in found["results"][:3]:
        outputs[f"/v1/chunks {hit['chunk_id']}"] = client.get(f"/v1/chunks/{hit['chunk_id']}").json()
        outputs[f"mcp get_document {hit['doc_id']}"] = mcp._get_document(GetDocumentArgs(doc_id=hit["doc_id"]))
    before = len(prompts.bodies)
    kb.ask(question, llm=["openai"], min_similarity=-1)
    outputs["remote prompt"] = "\n".join(prompts.bodies[before:])
    return outputs, [hit["file_path"] for hit in found["results"][:5]]


def shapes(half: str) -> dict[str, Any]:
    """One half of the folder through every door: values shown (and where), files found."""
    import os

    from fastapi.testclient import TestClient
    from typer.testing import CliRunner

    from ragstead.api import ApiConfig, create_app
    from ragstead.cli import app
    from ragstead.config import load_settings
    from ragstead.knowledge_base import KnowledgeBase
    from ragstead.mcp_server import McpScope, RagsteadMcp

    secrets = [s for s in json.loads((SHAPES / "expected.json").read_text())["secrets"] if s["half"] == half]
    assert not any(_shown(s["question"], _patterns(t)) for s in secrets for t in secrets), "a question holds a value"
    runner = CliRunner()
    os.environ.setdefault("OPENAI_API_KEY", "sk-bench-not-a-real-key-000000000000")
    with tempfile.TemporaryDirectory() as scratch:
        root = _project(half, Path(scratch))
        common = _once_per_half(root, runner, app)
        prompts = _Prompts()
        settings = load_settings(root).with_overrides(auto_tags=False)
        shown: dict[str, list[str]] = {}
        found = 0
        with KnowledgeBase(settings, transport=prompts.transport) as kb:
            client = TestClient(create_app(kb, ApiConfig(auth=False, as_user="ana")))
            mcp = RagsteadMcp(kb, McpScope("ana"))
            common["/v1/documents"] = client.get("/v1/documents").json()
            for secret in secrets:
                outputs, files = _per_question(secret["question"], root, runner, app, kb, client, mcp, prompts)
                patterns = _patterns(secret)
                doors = [door for door, output in {**common, **outputs}.items() if _shown(output, patterns)]
                if doors:
                    shown[secret["value"]] = sorted({door.split(" ", 1)[0] if door.startswith(("/v1/chunks", "mcp get"))
                                                     else door for door in doors})
                found += f"{FOLDER}/{secret['file']}" in files
    return {"half": half, "secrets": len(secrets), "shown": len(shown), "found": found,
            "shown_values": {value: doors for value, doors in shown.items()},
            "classes_shown": sorted({s["class"] for s in secrets if s["value"] in shown})}


# -- false positives ---------------------------------------------------------------------------------------


_NAMES = ["Ana", "Tom", "Priya", "Jonas", "Marta", "Kwame", "Lea", "Omar", "Sofia", "Bruno", "Yuki", "Hannah"]
_FOODS = ["flour", "butter", "sugar", "eggs", "milk", "garlic", "onion", "tomatoes", "rice", "lentils", "spinach"]
_STREETS = ["Mill Lane", "Harbour Road", "Rosenstrasse", "Rue des Lilas", "Kingsway", "Via Roma", "Elm Street"]


def _iban(rng: random.Random) -> str:
    country = rng.choice(["DE", "GB", "FR", "NL", "ES"])
    digits = "".join(rng.choice("0123456789") for _ in range(18))
    return f"{country}{rng.randint(10, 99)} " + " ".join(digits[i:i + 4] for i in range(0, 18, 4))


def _recipe(rng: random.Random) -> str:
    lines = [f"# {rng.choice(['Lentil', 'Tomato', 'Spinach', 'Garlic'])} {rng.choice(['soup', 'bake', 'curry'])}",
             f"Serves {rng.randint(2, 8)}. Prep {rng.randint(5, 30)} min, cook {rng.randint(15, 90)} min.",
             "## Ingredients"]
    lines += [f"- {rng.randint(1, 500)} g {rng.choice(_FOODS)}" for _ in range(rng.randint(3, 7))]
    lines += ["## Method", f"Heat the oven to {rng.choice([180, 200, 220])} °C (gas mark {rng.randint(4, 7)}).",
              f"Pass the sauce through a sieve, then simmer for {rng.randint(5, 40)} minutes.",
              "Key step: rest the dough for an hour. Season to taste and serve with bread."]
    return "\n".join(lines)


def _meeting(rng: random.Random) -> str:
    day, hour = rng.randint(1, 28), rng.randint(8, 17)
    people = rng.sample(_NAMES, 4)
    return "\n".join([
        f"# Weekly sync {day:02d}/{rng.randint(1, 12):02d}",
        f"Time: {hour}:{rng.choice(['00', '15', '30', '45'])}-{hour + 1}:00, "
        f"room {rng.choice('ABC')}{rng.randint(1, 40)}",
        f"Attendees: {', '.join(people)}",
        f"- {people[0]} to pass the budget to finance by Friday; code review of PR #{rng.randint(100, 9999)} done.",
        f"- Key decision: ship version {rng.randint(1, 5)}.{rng.randint(0, 20)}.{rng.randint(0, 9)} on the "
        f"{rng.randint(1, 28)}th; the access badge system goes live at {rng.randint(6, 9)}:30.",
        f"- Login page redesign: {people[1]} shares mocks; token budget for the model is {rng.randint(1, 64)}k.",
        f"- Next meeting {rng.choice(['Monday', 'Tuesday', 'Thursday'])} at {rng.randint(9, 16)}:00, dial-in "
        f"+44 20 {rng.randint(3000, 8999)} {rng.randint(1000, 9999)}, meeting ID {rng.randint(100, 999)} "
        f"{rng.randint(100, 999)} {rng.randint(1000, 9999)}.",
    ])


def _invoice(rng: random.Random) -> str:
    amount = rng.randint(100, 99999) / 100
    return "\n".join([
        f"Invoice no. {rng.randint(2020, 2025)}-{rng.randint(1, 9999):04d}",
        f"Customer number: {rng.randint(100000, 9999999)}   Order number: "
        f"{rng.choice('ABCDE')}{rng.randint(10000, 99999)}-{rng.randint(10, 99)}",
        f"{rng.randint(1, 20)} x consulting hours at EUR {rng.randint(60, 180)}.00",
        f"Subtotal: EUR {amount:,.2f}  VAT (19 %): EUR {amount * 0.19:,.2f}  Total: EUR {amount * 1.19:,.2f}",
        f"IBAN: {_iban(rng)}  BIC: {rng.choice(['COBADEFFXXX', 'DEUTDEDBXXX', 'BARCGB22', 'INGBNL2A'])}",
        f"VAT ID: DE{rng.randint(100000000, 999999999)}  Sort code {rng.randint(10, 99)}-{rng.randint(10, 99)}-"
        f"{rng.randint(10, 99)}  Reference: INV {rng.randint(1000, 9999)} {rng.randint(1000, 9999)}",
        f"Paid by card ending {rng.randint(1000, 9999)} on {rng.randint(1, 28)} March; postcode "
        f"{rng.choice(['SW1A 1AA', '10115', '75011', 'EH1 2NG'])}.",
    ])


def _contacts(rng: random.Random) -> str:
    lines = ["# Contacts"]
    for name in rng.sample(_NAMES, 5):
        lines.append(f"{name}: +{rng.choice([1, 33, 44, 49])} {rng.randint(100, 999)} {rng.randint(100, 999)} "
                     f"{rng.randint(1000, 9999)}, {rng.randint(1, 200)} {rng.choice(_STREETS)}")
    lines.append(f"Door buzzer for flat {rng.randint(1, 40)}; parcel tracking 1Z{rng.randint(10**15, 10**16 - 1)}.")
    return "\n".join(lines)


def _orders(rng: random.Random) -> str:
    lines = ["Orders this month"]
    for _ in range(rng.randint(3, 6)):
        lines.append(f"- Order #{rng.randint(10**6, 10**8)} ({rng.choice(['shoes', 'kettle', 'books', 'desk lamp'])}), "
                     f"EUR {rng.randint(5, 300)}.{rng.randint(0, 99):02d}, delivered {rng.randint(1, 28)}/"
                     f"{rng.randint(1, 12)}; tracking {rng.choice(['DHL', 'UPS'])} {rng.randint(10**9, 10**11)}")
    lines.append(f"Discount code SPRING{rng.randint(10, 40)} saved EUR {rng.randint(3, 30)}; flight "
                 f"{rng.choice(['LH', 'BA', 'TP'])}{rng.randint(100, 9999)} seat "
                 f"{rng.randint(1, 40)}{rng.choice('ABCDEF')}.")
    return "\n".join(lines)


def ordinary_prose(count: int = 2000, seed: int = 50) -> dict[str, str]:
    """A seeded sample of the ordinary notes people keep, which hold numbers, codes and times but no secret."""
    rng = random.Random(seed)
    makers = (_recipe, _meeting, _invoice, _contacts, _orders)
    return {f"{maker.__name__[1:]}-{n:04d}.md": maker(rng) for n in range(count) for maker in [makers[n % len(makers)]]}


def _chunks_of_files(files: dict[str, Path]) -> Iterator[tuple[str, Any]]:
    """(path, chunk record) of every chunk the index would store for these files (masked as it would be)."""
    from ragstead.config import Settings
    from ragstead.documents.ids import file_sha256
    from ragstead.indexing.build import FileCandidate, prepare_file

    options = Settings(root=Path(tempfile.gettempdir())).indexing()
    for rel, path in files.items():
        info = path.stat()
        outcome = prepare_file(FileCandidate(rel, "kb", path, info.st_size, info.st_mtime, file_sha256(path), True),
                               options)
        for write in outcome if isinstance(outcome, list) else []:
            for chunk in write.chunks:
                yield rel, chunk, write.document


def _masked(chunk: Any, document: Any) -> bool:
    from ragstead.documents.secrets import MASK

    return any(MASK in (field or "") for field in (chunk.text, chunk.section_path, document.title,
                                                   document.subject, " ".join(document.tags)))


def false_positives(scifact: Path) -> dict[str, Any]:
    """Chunks masked in corpora that hold no secret, with each masked line for a person to read."""
    from ragstead.documents.secrets import MASK

    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as scratch:
        corpora: dict[str, dict[str, Path]] = {}
        if (scifact / "corpus.jsonl").is_file():
            folder = Path(scratch) / "scifact"
            folder.mkdir()
            files = {}
            for line in (scifact / "corpus.jsonl").read_text(encoding="utf-8").splitlines():
                doc = json.loads(line)
                path = folder / f"{doc['_id']}.txt"
                path.write_text(f"{doc.get('title', '')}\n\n{doc['text']}\n", encoding="utf-8")
                files[f"kb/scifact/{path.name}"] = path
            corpora["SciFact"] = files
        for notes in NOTES_SETS:
            corpora[notes.name] = {f"kb/{p.relative_to(notes).as_posix()}": p for p in sorted(notes.rglob("*"))
                                   if p.is_file() and p.suffix != ".py" and p.name not in ("questions.jsonl",)}
        prose = Path(scratch) / "prose"
        prose.mkdir()
        for name, text in ordinary_prose().items():
            (prose / name).write_text(text + "\n", encoding="utf-8")
        corpora["ordinary prose"] = {f"kb/{p.name}": p for p in sorted(prose.iterdir())}
        for name, files in corpora.items():
            chunks, wrong, lines = 0, 0, []
            for rel, chunk, document in _chunks_of_files(files):
                chunks += 1
                if _masked(chunk, document):
                    wrong += 1
                    lines += [f"{rel}: {line.strip()[:160]}" for line in
                              (chunk.text + "\n" + (chunk.section_path or "")).splitlines() if MASK in line][:3]
            out[name] = {"files": len(files), "chunks": chunks, "masked": wrong,
                         "per_1000": round(1000 * wrong / max(chunks, 1), 2), "lines": lines}
    return out


def run(scifact: Path = DEFAULT_SCIFACT, label: str = "") -> dict[str, Any]:
    results = {"shapes": [shapes("fit"), shapes("heldout")], "false_positives": false_positives(scifact)}
    name = f"secret_masking{'_' + label if label else ''}"  # not secrets.json: .gitignore keeps such names out
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    table = io.StringIO()
    table.write("| half | secrets | values shown (any door) | questions whose file is in the top 5 |\n"
                "|---|---|---|---|\n")
    for half in results["shapes"]:
        table.write(f"| {half['half']} | {half['secrets']} | {half['shown']} | {half['found']} |\n")
    table.write("\n| corpus | files | chunks | masked wrongly | per 1,000 chunks |\n|---|---|---|---|---|\n")
    for corpus, row in results["false_positives"].items():
        table.write(f"| {corpus} | {row['files']} | {row['chunks']} | {row['masked']} | {row['per_1000']} |\n")
    (RESULTS / f"{name}.md").write_text(table.getvalue(), encoding="utf-8")
    print(table.getvalue())
    for half in results["shapes"]:
        for value, doors in half["shown_values"].items():
            print(f"{half['half']}: shown {value!r} by {', '.join(doors)}")
    for corpus, row in results["false_positives"].items():
        for line in row["lines"][:40]:
            print(f"{corpus}: {line}")
    return results


if __name__ == "__main__":  # `python -m bench.secrets [--dataset DIR] [--label NAME] [--part shapes|fp|all]`
    import argparse

    parser = argparse.ArgumentParser(prog="python -m bench.secrets")
    parser.add_argument("--dataset", type=Path, default=DEFAULT_SCIFACT, help="SciFact's BEIR folder")
    parser.add_argument("--label", default="", help="a name for this run's results file")
    parser.add_argument("--part", choices=["all", "shapes", "fp"], default="all")
    args = parser.parse_args()
    if args.part == "shapes":
        for result in (shapes("fit"), shapes("heldout")):
            print(json.dumps(result, indent=1, ensure_ascii=False))
    elif args.part == "fp":
        for corpus, row in false_positives(args.dataset).items():
            print(corpus, {k: v for k, v in row.items() if k != "lines"})
            for line in row["lines"][:60]:
                print("   ", line)
    else:
        run(args.dataset, args.label)
