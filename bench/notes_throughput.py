"""`python -m bench notes`: index time of a folder of small personal notes against the embedder alone (issue 38,
item 5), in ONE run, back to back, with the machine's load beside each number.

1,000 generated markdown notes (40-200 words of everyday vocabulary, a title, some front matter tags, lists) in
a personal project. Timed, in this order:
1. the pipeline without a model (an embedder that returns a constant vector): what ragstead adds per file;
   its chunk texts are exactly the ones the real run embeds;
2. the configured embedder alone over those chunk texts (one call, as `bench index` does);
3. `kb.index()` with that same embedder object, in a fresh project (the code `ragstead index` runs);
4. the embedder alone again, so a load that changed during the run shows (the ratio uses the mean of 2 and 4).
Each step's CPU seconds (this process, every thread) are kept beside its wall time: on a shared machine the wall
time of the same step moves by a quarter between runs, the CPU time much less.
With `--profile`, the pipeline without a model also runs under cProfile and its top functions are printed.
"""

from __future__ import annotations

import cProfile
import io
import os
import pstats
import random
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import Timer, write_project, write_results

NOTES = 1000
WORDS = ("meeting garden budget recipe travel heron invoice client project deadline review draft idea book chapter "
         "kitchen bicycle repair doctor appointment summer winter coffee friend family plan list river walk photo "
         "camera code python server backup renewal insurance tax receipt school teacher homework concert ticket "
         "train station holiday beach mountain weather rain snow market bread cheese apple orange dinner lunch "
         "breakfast call email letter contract lease apartment landlord plumber paint window door garage car tyre "
         "oil service bank account transfer salary pension loan mortgage rent bill phone laptop keyboard screen "
         "battery charger router wifi printer paper pen notebook calendar birthday gift party wedding baby dog cat "
         "vet walk run gym yoga swim bike race marathon knee shoulder back pain sleep dream morning evening night "
         "week month year today tomorrow yesterday the a of and to in is was for on with that this it as at by "
         "from we they you our their have has had not but or be are will would should could may might").split()


class ConstantEmbedder:
    """Implements `ragstead.Embedder` at no cost: what the pipeline takes without the model."""

    name = "bench-constant-384"
    dim = 384

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        vectors = np.zeros((len(texts), self.dim), dtype=np.float32)
        vectors[:, 0] = 1.0
        return vectors

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed_documents([text])[0]


def notes(count: int = NOTES, seed: int = 38) -> dict[str, str]:
    """{relative path: markdown} of `count` small notes in three folders."""
    rng = random.Random(seed)
    files: dict[str, str] = {}
    for i in range(count):
        sentences = []
        for _ in range(rng.randint(4, 16)):
            words = rng.choices(WORDS, k=rng.randint(8, 14))
            sentences.append(" ".join(words).capitalize() + ".")
        front = f"---\ntags: [{rng.choice(WORDS)}, {rng.choice(WORDS)}]\n---\n" if i % 5 == 0 else ""
        items = "".join(f"- {rng.choice(WORDS)} {rng.choice(WORDS)}\n" for _ in range(rng.randint(0, 4)))
        title = f"{rng.choice(WORDS).title()} {rng.choice(WORDS)} {i}"
        files[f"notes/{rng.choice(('work', 'home', 'misc'))}/{i:04d}-{rng.choice(WORDS)}.md"] = (
            f"{front}# {title}\n\n{' '.join(sentences)}\n\n{items}")
    return files


def _project(root: Path, files: dict[str, str]) -> Path:
    return write_project(root, files, '[ragstead]\nroots = ["notes"]\n')


class Clock(Timer):
    """Wall and CPU seconds (the process, all threads: the embedder's and tantivy's) of a block."""

    def __enter__(self) -> Clock:
        self.cpu_start = time.process_time()
        super().__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        super().__exit__(*exc)
        self.cpu = time.process_time() - self.cpu_start


def load() -> float:
    """The 1-minute load average (the machine is shared: every number is read beside it)."""
    return round(os.getloadavg()[0], 2)


def run(count: int = NOTES, profile: bool = False) -> dict[str, Any]:
    import ragstead

    files = notes(count)
    work = Path(tempfile.mkdtemp(prefix="ragstead-notes-bench-"))
    try:
        bare = ragstead.open(_project(work / "bare", files), embedder=ConstantEmbedder())
        loads = {"start": load()}
        profiler = cProfile.Profile() if profile else None
        with Clock() as pipeline:
            if profiler:
                profiler.enable()
            bare.index()
            if profiler:
                profiler.disable()
        texts = [row[0] for row in bare.store._db.execute("SELECT text FROM chunks ORDER BY id")]
        bare.close()

        kb = ragstead.open(_project(work / "real", files))
        embedder = kb.embedder  # the configured model and batch size, as `ragstead index` loads them
        embedder.embed_documents(texts[:8])  # warm: the first run of a session allocates
        loads["raw_before"] = load()
        with Clock() as raw_before:
            embedder.embed_documents(texts)
        loads["index"] = load()
        with Clock() as full:
            report = kb.index()
        loads["raw_after"] = load()
        with Clock() as raw_after:
            embedder.embed_documents(texts)
        loads["end"] = load()
        assert report.chunks_embedded == len(texts), (report.chunks_embedded, len(texts))
        commits = kb.store.stats()["lexical_generation"]  # one per store write (and the settling rebuild's)
        kb.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    raw = (raw_before.seconds + raw_after.seconds) / 2
    raw_cpu = (raw_before.cpu + raw_after.cpu) / 2
    result: dict[str, Any] = {
        "notes": count, "chunks": len(texts), "model": embedder.name,
        "pipeline_without_model": {"seconds": round(pipeline.seconds, 2), "cpu": round(pipeline.cpu, 2),
                                   "ms_per_file": round(pipeline.seconds * 1000 / count, 2)},
        "raw_embedder": {"before": round(raw_before.seconds, 2), "after": round(raw_after.seconds, 2),
                         "mean": round(raw, 2), "cpu_before": round(raw_before.cpu, 2),
                         "cpu_after": round(raw_after.cpu, 2), "cpu_mean": round(raw_cpu, 2)},
        "ragstead_index": {"seconds": round(full.seconds, 2), "ratio_vs_raw": round(full.seconds / raw, 3),
                           "cpu": round(full.cpu, 2), "cpu_ratio_vs_raw": round(full.cpu / raw_cpu, 3),
                           "writes": commits},
        "load_1min": loads, "cpus": os.cpu_count(),
    }
    if profiler:
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(30)
        result["profile_top"] = out.getvalue()
    return result


def table(r: dict[str, Any]) -> list[list[str]]:
    loads = r["load_1min"]
    raw = r["raw_embedder"]
    index, bare = r["ragstead_index"], r["pipeline_without_model"]
    return [
        ["step (same run, back to back)", "wall s", "CPU s", "vs embedder alone (wall / CPU)", "load (1 min)"],
        [f"pipeline without a model ({r['notes']} notes, {r['chunks']} chunks)", f"{bare['seconds']:.1f}",
         f"{bare['cpu']:.1f}", f"{bare['ms_per_file']:.1f} ms a file", f"{loads['start']}"],
        [f"embedder alone ({r['model']}), before", f"{raw['before']:.1f}", f"{raw['cpu_before']:.1f}", "",
         f"{loads['raw_before']}"],
        [f"**ragstead index** (files → SQLite + tantivy, {index['writes']} writes)", f"{index['seconds']:.1f}",
         f"{index['cpu']:.1f}", f"**{index['ratio_vs_raw']:.2f}× / {index['cpu_ratio_vs_raw']:.2f}×** (of the mean "
         "of both)", f"{loads['index']}"],
        ["embedder alone, after", f"{raw['after']:.1f}", f"{raw['cpu_after']:.1f}", "",
         f"{loads['raw_after']} → {loads['end']}"],
    ]


def main(count: int = NOTES, profile: bool = False) -> None:
    result = run(count, profile)
    if profile:
        print(result.pop("profile_top"))
    write_results("notes_throughput", result, table(result))
