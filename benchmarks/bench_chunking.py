"""Chunking throughput (MB/s of document text) per strategy on the stdlib demo corpus.

Baseline, measured in the same run: tokenising the same text with the MiniLM
tokenizer (batch encode with offsets), which every strategy must do once.
The ratio column is strategy throughput / baseline throughput (1.0 = chunking
costs nothing beyond tokenisation).

The semantic chunker is bound by the embedding model, so by default it runs
on a subset of documents (--semantic-docs; 0 skips it, -1 uses all).

    .venv/bin/python benchmarks/bench_chunking.py [--docs docs.jsonl] [--size 200] [--overlap 20]
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from ragrade.corpus.chunk import chunk_documents, create_chunker
from ragrade.corpus.tokens import get_counter
from ragrade.corpus.types import Document


def _mb(docs: list[Document]) -> float:
    return sum(len(d.text.encode("utf-8")) for d in docs) / 1e6


def _best_of(fn, repeats: int) -> float:  # type: ignore[no-untyped-def]
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", help="documents JSONL (default: build the stdlib demo corpus)")
    ap.add_argument("--size", type=int, default=200)
    ap.add_argument("--overlap", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--semantic-docs", type=int, default=40)
    args = ap.parse_args()

    t0 = time.perf_counter()
    if args.docs:
        from ragrade.corpus.files import read_documents

        docs = read_documents(args.docs)
    else:
        from ragrade.corpus.demo import build_demo_corpus

        docs = build_demo_corpus()
    print(f"corpus: {len(docs)} documents, {_mb(docs):.2f} MB (loaded in {time.perf_counter() - t0:.1f} s)")

    counter = get_counter()
    texts = [d.text for d in docs]
    base_s = _best_of(lambda: counter.index_many(texts), args.repeats)
    base = _mb(docs) / base_s
    print(f"{'strategy':<10} {'docs':>6} {'MB':>6} {'chunks':>7} {'seconds':>8} {'MB/s':>7} {'ratio':>6}")
    print(f"{'tokenize':<10} {len(docs):>6} {_mb(docs):>6.2f} {'-':>7} {base_s:>8.2f} {base:>7.2f} {1.0:>6.2f}")
    for strategy in ("token", "recursive", "sentence", "semantic"):
        subset = docs
        repeats = args.repeats
        if strategy == "semantic":
            if args.semantic_docs == 0:
                continue
            subset = docs if args.semantic_docs < 0 else docs[:: max(1, len(docs) // args.semantic_docs)]
            repeats = 1
        chunker = create_chunker(strategy, size=args.size, overlap=args.overlap)
        chunk_documents(subset[:5], chunker)  # warm up: tokenizer, and the embedding model for semantic
        result: list = []  # type: ignore[type-arg]
        secs = _best_of(lambda c=chunker, s=subset, r=result: r.append(chunk_documents(s, c)), repeats)
        mbps = _mb(subset) / secs
        print(
            f"{strategy:<10} {len(subset):>6} {_mb(subset):>6.2f} {len(result[-1]):>7} {secs:>8.2f} "
            f"{mbps:>7.2f} {mbps / base:>6.2f}"
        )


if __name__ == "__main__":
    main()
