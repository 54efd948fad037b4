"""`python -m bench WHAT`: all | index | latency | quality | api | fusion | refusal | stores | chunking | models
| lexical | ensemble | scaling | memory | drift | ingest | tagging | dedup | rerank | answers | ranker | feedback
| title | snapshots | lists | milvus | milvus-scifact | superseded | notes | partitions | chat | aggregates
| bilingual | startup.

Every table with its command: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from bench.common import DEFAULT_SCIFACT


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("what", choices=["all", "index", "latency", "latency-one", "latency-cold", "latency-feedback",
                                           "latency-vector",
                                           "quality", "api", "chat",
                                           "api-client", "refusal", "fusion", "stores", "chunking", "models",
                                           "lexical", "ensemble", "scaling", "memory", "drift", "ingest", "tagging",
                                           "dedup", "rerank", "answers", "ranker", "feedback", "title",
                                           "snapshots", "lists", "milvus", "milvus-scifact", "superseded", "notes",
                                           "partitions", "train-reader", "reader", "aggregates", "bilingual",
                                           "startup"])
    parser.add_argument("--label", default="", help="reader bench: a name for this run's results file")
    parser.add_argument("--squad", type=Path, default=None,
                        help="train-reader: SQuAD 2.0's train-v2.0.json (its train split only; kept outside the repo)")
    parser.add_argument("--profile", action="store_true", help="notes bench: profile the pipeline without a model")
    parser.add_argument("--fit", action="store_true",
                        help="answers bench: also write the fitted gate model; bilingual: the cosine maps")
    parser.add_argument("--reuse", action="store_true", help="answers bench: reuse the last run's retrievals")
    parser.add_argument("--split", default="train", help="rerank bench: train (choose) or test (report once); "
                        "chat bench: fit or heldout (default: both)")
    parser.add_argument("--configs", default="", help="rerank bench: only these labels, ';'-separated")
    parser.add_argument("--dataset", type=Path, default=DEFAULT_SCIFACT, help="BEIR folder (default: SciFact)")
    parser.add_argument("--limit", type=int, default=None,
                        help="index bench: first N corpus documents; answers bench: first N SciFact queries a split")
    parser.add_argument("--skip-chroma", action="store_true")
    parser.add_argument("--sizes", default="100000,1000000", help="latency bench: chunk counts")
    parser.add_argument("--size", type=int, default=0)
    parser.add_argument("--queries", type=int, default=100, help="stores bench: queries per scope and mode")
    parser.add_argument("--output", default="", help="stores bench: results file name (default store_latency)")
    parser.add_argument("--extra-partitions", type=int, default=1000,
                        help="partitions bench: empty user partitions added before the second measurement")
    parser.add_argument("--ef-search", default="",
                        help="partitions bench: hnsw.ef_search values to sweep for a 2 %% user, e.g. 40,100,200,400")
    parser.add_argument("--pg-data", type=Path, default=None,
                        help="partitions bench: an earlier run's server data folder (databases loaded): measure again")
    parser.add_argument("--milvus-url", default="",
                        help="milvus bench: a Milvus server (milvus://127.0.0.1:19530) instead of Milvus Lite")
    parser.add_argument("--hnsw-serial", action="store_true",
                        help="stores bench: also time an HNSW build with no parallel worker (~20 min at 1M)")
    parser.add_argument("--previous-queries", type=int, default=20,
                        help="stores bench: queries per scope and mode for the previous PostgreSQL baseline")
    parser.add_argument("--chunking", default="400/80,200/40,150/30",
                        help="chunking bench: words/overlap configurations")
    parser.add_argument("--models",
                        default="minilm-l6-int8,minilm-l6-fp32,paraphrase-minilm-l3,wordllama-256,e5-small-q4",
                        help="models bench: catalog ids")
    parser.add_argument("--part", choices=["all", "quality", "speed"], default="all",
                        help="models bench: quality (evals, cached), speed (embedding probe), or both")
    parser.add_argument("--workdir", type=Path, default=None, help="latency bench: keep synthetic indexes here")
    parser.add_argument("--requests", type=int, default=2000, help="api bench: requests per run (upper bound)")
    parser.add_argument("--seconds", type=float, default=60.0, help="api bench: time limit per run")
    parser.add_argument("--threads", type=int, default=8, help="api bench: concurrent client connections")
    parser.add_argument("--index", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--previous", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--base", default="", help="startup bench: a checkout of the baseline commit (its src/ runs "
                        "beside this one); api-client: the server's URL")
    parser.add_argument("--repeat", type=int, default=9, help="startup bench: runs of each command (medians)")
    parser.add_argument("--key", default="", help=argparse.SUPPRESS)
    parser.add_argument("--load", default="{}", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.what == "api-client":
        from bench.api_load import client

        load = json.loads(args.load)
        print(json.dumps(client(args.base, args.key, load["requests"], load["seconds"], load["threads"],
                                load["distinct"])))
        return
    if args.what == "latency-one":
        from bench.query_latency import one_size

        print(json.dumps(one_size(args.size, args.workdir)))
        return
    if args.what == "latency-vector":  # not in `all`: latency-one's unfiltered vector rows, interleaved (busy machine)
        from bench.query_latency import vector_interleaved

        if args.workdir is None:
            parser.error("latency-vector needs --workdir: where synthetic-SIZE.db is, or is built")
        print(json.dumps(vector_interleaved(args.size, args.workdir, args.queries)))
        return
    if args.what == "latency-feedback":  # not in `all`: it reuses the indexes `bench latency --workdir` left
        from bench.query_latency import feedback_cost

        feedback_cost([int(n) for n in args.sizes.split(",")], args.workdir)
        return
    if args.what == "latency-cold":
        from bench.query_latency import cold_query

        print(json.dumps(cold_query(args.index, args.previous)))
        return
    if args.what == "startup":  # not in `all`: it is about whole processes on a quiet machine (~1 min)
        from bench.startup import read_commands

        read_commands(Path(args.base) if args.base else None, args.repeat)
        return
    if args.what in ("index", "all"):
        from bench.index_throughput import main as index_main

        index_main(args.dataset, args.limit, args.skip_chroma)
    if args.what in ("notes", "all"):
        from bench.notes_throughput import main as notes_main

        notes_main(args.size or 1000, args.profile)
    if args.what in ("latency", "all"):
        from bench.query_latency import main as latency_main

        latency_main([int(s) for s in args.sizes.split(",")], args.workdir)
    if args.what in ("api", "all"):
        from bench.api_load import main as api_main

        api_main(args.workdir, args.requests, args.seconds, args.threads)
    if args.what == "models":  # not in `all`: each model re-embeds the corpus
        from bench.model_sweep import main as models_main

        models_main(args.dataset, [m for m in args.models.split(",") if m], args.part != "speed",
                    args.part != "quality")
    if args.what in ("drift", "all"):
        from bench.lexical_drift import main as drift_main

        drift_main(args.dataset)
    if args.what in ("memory", "all"):
        from bench.embed_memory import main as memory_main

        memory_main()
    if args.what in ("scaling", "all"):
        from bench.fusion_scaling import main as scaling_main

        scaling_main(args.dataset)
    if args.what == "ensemble":  # not in `all`: it needs the E5 index of `models`
        from bench.ensemble_sweep import main as ensemble_main

        ensemble_main(args.dataset)
    if args.what == "chunking":  # not in `all`: each configuration re-embeds the corpus (~4 min on SciFact)
        from bench.chunking_sweep import main as chunking_main

        configs = [tuple(int(x) for x in c.split("/")) for c in args.chunking.split(",") if c]
        chunking_main(args.dataset, configs)  # type: ignore[arg-type]
    if args.what == "stores":  # not in `all`: it needs the server extras and ~1 h at 1M chunks
        from bench.store_latency import main as stores_main

        stores_main([int(s) for s in args.sizes.split(",") if s], args.workdir, args.dataset, args.queries,
                    args.output or "store_latency", args.skip_chroma, args.previous_queries, args.hnsw_serial)
    if args.what == "milvus":  # not in `all`: it needs the milvus extra (Milvus Lite)
        from bench.milvus_store import main as milvus_main

        milvus_main(args.size or 100_000, args.queries, args.workdir, args.milvus_url)
    if args.what == "milvus-scifact":  # not in `all` either: Milvus Lite, and the whole SciFact corpus embedded
        from bench.milvus_scifact import main as milvus_scifact_main

        milvus_scifact_main(args.dataset, args.workdir)
    if args.what == "reader":  # not in `all`: ~5 min; --squad adds the public answer-or-refuse set
        from bench.reader_eval import main as reader_bench

        reader_bench(args.squad, label=args.label)
        return
    if args.what == "train-reader":  # not in `all`: needs the SQuAD file; ~5 min
        from bench.train_reader import main as train_reader

        if args.squad is None:
            parser.error("train-reader needs --squad PATH (SQuAD 2.0's train-v2.0.json)")
        train_reader(args.squad, limit=args.limit)
        return
    if args.what == "partitions":  # not in `all`: the PostgreSQL server extras, ~10 min at 100k chunks
        from bench.partitions import main as partitions_main

        partitions_main(args.size or 100_000, args.queries, args.workdir, args.extra_partitions, args.output,
                        tuple(int(v) for v in args.ef_search.split(",") if v), args.pg_data)
    if args.what in ("ingest", "all"):
        from bench.ingest_throughput import main as ingest_main

        ingest_main()
    if args.what in ("snapshots", "all"):
        from bench.snapshots import main as snapshots_main

        snapshots_main()
    if args.what in ("lists", "all"):
        from bench.list_answers import main as lists_main

        lists_main()
    if args.what == "aggregates":  # not in `all` yet: whole-folder questions on the household folders (~20 s)
        from bench.aggregates import main as aggregates_main

        aggregates_main(args.label)
    if args.what == "bilingual":  # not in `all`: two models each index the bilingual notes (~2 min)
        from bench.bilingual import main as bilingual_main

        bilingual_main(args.label, args.fit)
    if args.what in ("tagging", "all"):
        from bench.tagging_precision import main as tagging_precision_main
        from bench.tagging_threshold import main as tagging_main

        tagging_precision_main()
        tagging_main()
    if args.what == "dedup":  # not in `all`: it cuts SciFact into 100-word chunks once (~6 min)
        from bench.dedup_sources import main as dedup_main

        dedup_main(args.dataset)
    if args.what == "ranker":  # not in `all`: it needs the cached candidates of `bench fusion`
        from bench.learned_ranker import main as ranker_main

        ranker_main()
    if args.what == "feedback":  # not in `all`: it needs the cached candidates of `bench fusion`
        from bench.query_feedback import main as feedback_main

        feedback_main()
    if args.what == "title":  # not in `all`: it needs the cached candidates of `bench fusion`
        from bench.title_field import main as title_main

        title_main()
    if args.what == "superseded":  # not in `all`: false alarms of "the newer note wins" on the notes set (~1 min)
        from bench.superseded import main as superseded_main

        superseded_main()
    if args.what == "chat":  # not in `all`: follow-ups in a conversation against asked alone (~1 min)
        from bench.chat import main as chat_main

        chat_main(args.split)
    if args.what == "answers":  # not in `all`: ~15 min (every SciFact query twice, sentences embedded)
        from bench.answers import main as answers_main

        answers_main(args.dataset, args.fit, args.limit, args.reuse)
    if args.what == "refusal":
        from bench.refusal_calibration import main as refusal_main

        refusal_main(args.dataset)
    if args.what == "rerank":  # not in `all`: the sentence budget against nDCG@10 and latency
        from bench.rerank_speed import main as rerank_main

        rerank_main(args.dataset, args.split, args.queries, args.configs)  # --queries: the split's sample size
    if args.what == "fusion":
        from bench.fusion_sweep import main as fusion_main

        fusion_main(args.dataset)
    if args.what == "lexical":
        from bench.lexical_sweep import main as lexical_main

        lexical_main(args.dataset)
    if args.what in ("quality", "all"):
        from bench.quality import main as quality_main

        quality_main(args.dataset)


if __name__ == "__main__":
    main()
