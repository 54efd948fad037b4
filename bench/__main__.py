"""`python -m bench all | index | latency | quality` — see bench/README in the main README."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from bench.common import DEFAULT_SCIFACT


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("what", choices=["all", "index", "latency", "latency-one", "quality"])
    parser.add_argument("--dataset", type=Path, default=DEFAULT_SCIFACT, help="BEIR folder (default: SciFact)")
    parser.add_argument("--limit", type=int, default=None, help="index bench: first N corpus documents")
    parser.add_argument("--skip-chroma", action="store_true")
    parser.add_argument("--sizes", default="100000,1000000", help="latency bench: chunk counts")
    parser.add_argument("--size", type=int, default=0)
    parser.add_argument("--workdir", type=Path, default=None, help="latency bench: keep synthetic indexes here")
    args = parser.parse_args()
    if args.what == "latency-one":
        from bench.query_latency import one_size

        print(json.dumps(one_size(args.size, args.workdir)))
        return
    if args.what in ("index", "all"):
        from bench.index_throughput import main as index_main

        index_main(args.dataset, args.limit, args.skip_chroma)
    if args.what in ("latency", "all"):
        from bench.query_latency import main as latency_main

        latency_main([int(s) for s in args.sizes.split(",")], args.workdir)
    if args.what in ("quality", "all"):
        from bench.quality import main as quality_main

        quality_main(args.dataset)


if __name__ == "__main__":
    main()
