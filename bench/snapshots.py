"""`python -m bench snapshots`: export/import rate of a portable snapshot and the findability check's time, on
1,000 synthetic notes (issue 40, items 3 and 4).

The notes (~450 words each, a title, two headings, words drawn Zipf-like from a 5,000-word vocabulary plus a
few words of their own) are indexed once with the tests' model-free hashing embedder (384-d, like the default
model: the vectors' bytes are what export and import move, and neither embeds anything). 2% of them are
near-duplicates of another note, and 10% are private notes of ten users, so the findability check has scopes
and shadows to find. Timed, each in a fresh project:
1. `kb.export_snapshot`: read the index, write the zip (seconds, MB, documents/s);
2. `kb.import_snapshot` into the embedded store, and into PostgreSQL when the `postgres` extra is installed
   (a local server, started before the clock);
3. `kb.findability()` on the index, twice (the second run compares with the first).
"""

from __future__ import annotations

import random
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.common import Timer, write_project, write_results

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))  # the tests' hashing embedder (tests/helpers/fake_embedder.py)

NOTES = 1000
WORDS = 450
VOCABULARY = 5000


def notes(count: int = NOTES, seed: int = 40) -> dict[str, str]:
    """{relative path: markdown} of `count` synthetic notes."""
    rng = random.Random(seed)
    syllables = ["ka", "lo", "mi", "ren", "tu", "sa", "vor", "el", "dan", "pi", "qua", "ber", "nix", "ol", "ta"]
    vocabulary = list(dict.fromkeys("".join(rng.choice(syllables) for _ in range(rng.randint(2, 4)))
                                    for _ in range(VOCABULARY * 2)))[:VOCABULARY]
    weights = [1 / (rank + 1) for rank in range(len(vocabulary))]
    files: dict[str, str] = {}
    texts: list[str] = []
    for i in range(count):
        own = [f"{rng.choice(vocabulary)}{i}x" for _ in range(3)]  # a few words no other note has
        body = rng.choices(vocabulary, weights, k=WORDS)
        for word in own:
            body.insert(rng.randrange(len(body)), word)
        half = len(body) // 2
        title = " ".join(rng.choices(vocabulary[200:], k=3))
        text = (f"# {title.title()}\n\n## {rng.choice(vocabulary).title()}\n\n{' '.join(body[:half])}.\n\n"
                f"## {rng.choice(vocabulary).title()}\n\n{' '.join(body[half:])}.\n")
        if i % 50 == 49:  # a near-duplicate of an earlier note: one more sentence
            text = texts[rng.randrange(len(texts))] + "\nCopied here with one more line.\n"
        texts.append(text)
        folder = f"kb/users/u{i % 10}/notes" if i % 10 == 0 else "kb/notes"
        files[f"{folder}/note{i:04d}.md"] = text
    return files


def _project(root: Path, files: dict[str, str]) -> Path:
    return write_project(root, files)


def main(count: int = NOTES) -> None:
    import ragstead
    from helpers.fake_embedder import HashingEmbedder

    embedder = HashingEmbedder(384)
    rows: list[list[str]] = [["step", "documents", "chunks", "seconds", "rate", "detail"]]
    data: dict[str, Any] = {"notes": count, "words_per_note": WORDS}
    with tempfile.TemporaryDirectory(prefix="ragstead-bench-snap-") as scratch:
        base = Path(scratch)
        source = _project(base / "source", notes(count))
        with ragstead.open(source, embedder=embedder, roots=("kb",)) as kb:
            with Timer() as timer:
                indexed = kb.index()
            data["index_seconds"] = round(timer.seconds, 2)
            with Timer() as timer:
                exported = kb.export_snapshot(base / "notes.ragsnap")
            data["export"] = exported.to_dict() | {"documents_per_second": round(exported.documents / timer.seconds)}
            rows.append(["export", str(exported.documents), str(exported.chunks), f"{timer.seconds:.2f}",
                         f"{exported.documents / timer.seconds:,.0f} docs/s",
                         f"{exported.bytes / 2**20:.1f} MB file"])
            for label in ("findability (first run)", "findability (compared)"):
                with Timer() as timer:
                    report = kb.findability()
                data.setdefault("findability", []).append(report.to_dict() | {"wall_seconds": round(timer.seconds, 3)})
                kinds: dict[str, int] = {}
                for item in report.not_findable:
                    kinds[item.kind] = kinds.get(item.kind, 0) + 1
                rows.append([label, str(report.documents), str(indexed.chunks_written), f"{timer.seconds:.2f}",
                             f"{report.documents / timer.seconds:,.0f} docs/s",
                             f"{report.findable} findable; " + ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))])
        for store_label, spec in _targets():
            target = base / f"target-{store_label}"
            target.mkdir()
            with ragstead.open(target, embedder=embedder, store=spec) as kb:
                with Timer() as timer:
                    imported = kb.import_snapshot(base / "notes.ragsnap")
                data[f"import_{store_label}"] = imported.to_dict()
                rows.append([f"import into {store_label}", str(imported.documents), str(imported.chunks),
                             f"{timer.seconds:.2f}", f"{imported.documents / timer.seconds:,.0f} docs/s",
                             f"{imported.embedded} embedded"])
        _stop_servers()
    write_results("snapshots", data, rows)


_SERVERS: list[Any] = []


def _targets() -> list[tuple[str, str]]:
    """The stores to import into: the embedded one, and a local PostgreSQL when its extra is installed."""
    targets = [("sqlite", "")]
    try:
        from ragstead.stores.postgres_local import LocalPostgres

        folder = Path(tempfile.mkdtemp(prefix="ragstead-bench-pg-"))
        folder.chmod(0o755)  # the server runs as `nobody` when the bench runs as root
        server = LocalPostgres(folder / "data", durable=False)
        server.start()
        _SERVERS.append((server, folder))
        targets.append(("postgresql", server.create_database("bench_snapshots")))
    except Exception as exc:  # no server extra here: the embedded store's figure stands alone
        print(f"PostgreSQL skipped: {exc}", file=sys.stderr)
    return targets


def _stop_servers() -> None:
    while _SERVERS:
        server, folder = _SERVERS.pop()
        server.stop()
        shutil.rmtree(folder, ignore_errors=True)
