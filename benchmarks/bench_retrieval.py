"""Retrieval throughput against the libraries called directly, measured in the same run.

* BM25 indexing (chunks/s) and querying (queries/s): ragrade's BM25 (tokeniser with
  stemming + stopwords, hits with chunk ids) vs ``bm25s`` called directly with the same
  settings. Ratio = ours / direct (1.0 = no overhead).
* Dense encoding (passages/s): each MiniLM path of ragrade (``minilm`` = this machine's
  default, ``minilm-onnx``, ``minilm-bf16``) vs sentence-transformers' fp32 ``encode``
  called directly; ratio = ours / direct, and the minimum cosine to the fp32 vectors.
* ANN stores (faiss, usearch HNSW): recall@10 against exact search and query speed-up,
  on the demo vectors tiled with noise up to --ann-n vectors.
* Query transforms and post-processors (--tx-queries, 0 skips): document hit rate@k and latency
  per query of every transform / chain over bm25 and dense, against the untransformed retriever
  in the same run (ratio = transformed latency / baseline latency). Queries: six words of a
  sentence of a random chunk with one word dropped; the chunk's document is the relevant one.
  LLM transforms (hyde, multi-query, llm-rerank, llm-compress) run only with --llm.

Corpus: the stdlib demo corpus (``ragrade.corpus.demo``) chunked with the recursive
chunker (200 tokens); synthetic text only if the demo corpus is unavailable (printed).

    .venv/bin/python benchmarks/bench_retrieval.py [--docs 3000] [--passages 256] [--queries 2000]
"""

from __future__ import annotations

import argparse
import os
import random
import time
from typing import Any, ClassVar

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np


def corpus_texts(n_docs: int) -> tuple[list[str], str]:
    try:
        from ragrade.corpus.chunk import chunk_documents, create_chunker
        from ragrade.corpus.demo import build_demo_corpus

        docs = build_demo_corpus(limit=n_docs)
        chunks = chunk_documents(docs, create_chunker("recursive", size=200, overlap=20))
        return [c.text for c in chunks], f"stdlib demo corpus: {len(docs)} docs -> {len(chunks)} chunks"
    except Exception as exc:  # the corpus stage is not available: synthetic text
        rng = random.Random(0)
        from ragrade.embedding.embed import minilm_path

        with open(os.path.join(minilm_path(), "vocab.txt"), encoding="utf-8") as fh:
            vocab = [w for w in fh.read().split() if w.isalpha() and len(w) > 2]
        texts = [" ".join(rng.choice(vocab) for _ in range(rng.randint(60, 180))) for _ in range(n_docs * 3)]
        return texts, f"SYNTHETIC text ({len(texts)} passages; demo corpus unavailable: {exc})"


def timed(fn: Any, repeats: int = 1) -> tuple[float, Any]:
    best, out = float("inf"), None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def bench_bm25(texts: list[str], n_queries: int) -> None:
    import bm25s
    import Stemmer

    from ragrade.corpus.types import Chunk
    from ragrade.retrieval.bm25 import BM25Config, BM25Index
    from ragrade.retrieval.retrievers import to_hits

    rng = random.Random(1)
    queries = []
    for _ in range(n_queries):
        words = rng.choice(texts).split()
        start = rng.randrange(max(1, len(words) - 6))
        queries.append(" ".join(words[start : start + 6]) or "python")
    stemmer = Stemmer.Stemmer("english")

    def direct_index() -> Any:
        tok = bm25s.tokenization.Tokenizer(stopwords="en", stemmer=stemmer)
        ids = tok.tokenize(texts, return_as="tuple", show_progress=False)
        r = bm25s.BM25(method="lucene")
        r.index(ids, show_progress=False)
        return tok, r

    t_direct, (tok, direct) = timed(direct_index, 2)
    t_ours, ours = timed(lambda: BM25Index.build(texts, BM25Config()), 2)
    print(
        f"BM25 index: ours {len(texts) / t_ours:9.0f} chunks/s | bm25s {len(texts) / t_direct:9.0f} chunks/s | "
        f"ratio {t_direct / t_ours:.2f}"
    )

    def direct_query() -> Any:
        ids = tok.tokenize(queries, update_vocab=False, return_as="ids", show_progress=False)
        return direct.retrieve(ids, k=10, show_progress=False, n_threads=1)

    class _Idx:  # a minimal stand-in for Index so that hits are built as in a real search
        chunks: ClassVar[list[Chunk]] = [
            Chunk(id=f"c{i}", doc_id=f"d{i}", text=t, start=0, end=len(t), strategy="x") for i, t in enumerate(texts)
        ]

    def ours_query() -> Any:
        return [to_hits(_Idx(), p) for p in ours.search(queries, 10)]  # type: ignore[arg-type]

    tq_direct, (docs_d, _) = timed(direct_query, 2)
    tq_ours, hits = timed(ours_query, 2)
    agree = np.mean([h[0].chunk_id == f"c{d[0]}" for h, d in zip(hits, docs_d, strict=True) if h])
    print(
        f"BM25 query: ours {len(queries) / tq_ours:9.0f} q/s      | bm25s {len(queries) / tq_direct:9.0f} q/s      | "
        f"ratio {tq_direct / tq_ours:.2f} | top-1 agreement {agree:.3f}"
    )


def bench_dense(texts: list[str], n: int, specs: list[str]) -> np.ndarray:
    from ragrade.embedding.embed import SentenceTransformerEmbedder, create_embedder, minilm_backend

    rng = random.Random(2)
    sample = rng.sample(texts, min(n, len(texts)))
    words = np.mean([len(t.split()) for t in sample])
    st = SentenceTransformerEmbedder()
    model = st._model

    def direct() -> np.ndarray:
        return np.asarray(
            model.encode(
                sample, batch_size=32, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
            )
        )

    model.encode(sample[:8])
    print(f"dense: {len(sample)} passages, mean {words:.0f} words; 'minilm' uses the {minilm_backend()} path here")
    t_ref, ref = timed(direct)
    print(f"  sentence-transformers fp32 encode: {len(sample) / t_ref:7.1f} passages/s")
    for spec in specs:
        emb = create_embedder(spec)
        emb.embed(sample[:8])
        t, vecs = timed(lambda e=emb: e.embed(sample))
        t_ref2, _ = timed(direct)  # re-measure the baseline next to each path (shared CPUs drift)
        base = min(t_ref, t_ref2)
        cos = float((vecs * ref).sum(1).min())
        print(f"  {spec:<12} {len(sample) / t:7.1f} passages/s | ratio {base / t:.2f} | min cosine {cos:.5f}")
    return np.asarray(ref, dtype=np.float32)


def bench_ann(base: np.ndarray, n: int) -> None:
    import tempfile

    from ragrade.retrieval.store import create_store, recall_at_k, topk_exact

    rng = np.random.default_rng(3)
    reps = int(np.ceil(n / len(base)))
    x = np.concatenate([base + 0.05 * rng.normal(size=base.shape) for _ in range(reps)])[:n].astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    q = x[rng.choice(len(x), 200, replace=False)] + 0.02 * rng.normal(size=(200, x.shape[1]))
    q = (q / np.linalg.norm(q, axis=1, keepdims=True)).astype(np.float32)
    t_exact, exact = timed(lambda: topk_exact(x, q, 10))
    print(f"ANN over {len(x)} x {x.shape[1]} vectors, 200 queries; exact {len(q) / t_exact:8.0f} q/s")
    with tempfile.TemporaryDirectory() as tmp:
        for backend in ("faiss", "usearch"):
            store = create_store(backend, os.path.join(tmp, backend), x.shape[1])
            t_build, _ = timed(lambda s=store: s.build(x))
            t_q, got = timed(lambda s=store: s.search(q, 10))
            print(
                f"  {backend:<8} build {t_build:6.1f}s | {len(q) / t_q:8.0f} q/s | "
                f"recall@10 {recall_at_k(exact, got, 10):.4f}"
            )


def _pseudo_queries(chunks: list[Any], n: int) -> list[tuple[str, str]]:
    rng = random.Random(4)
    out: list[tuple[str, str]] = []
    while len(out) < n:
        ch = rng.choice(chunks)
        words = [w for w in ch.text.replace("\n", " ").split() if w.isalpha()]
        if len(words) < 8:
            continue
        start = rng.randrange(len(words) - 6)
        window = words[start : start + 6]
        del window[rng.randrange(6)]
        out.append((" ".join(window), ch.doc_id))
    return out


def bench_transforms(n_docs: int, n_queries: int, k: int, llm_spec: str | None, base_url: str | None) -> None:
    import tempfile

    from ragrade.corpus.chunk import chunk_documents, create_chunker
    from ragrade.corpus.demo import build_demo_corpus
    from ragrade.retrieval.index import IndexConfig, build_index, load_index
    from ragrade.retrieval.transforms import build_pipeline

    docs = build_demo_corpus(limit=n_docs)
    chunks = chunk_documents(docs, create_chunker("recursive", size=200, overlap=20))
    queries = _pseudo_queries(chunks, n_queries)
    llm = None
    if llm_spec:
        from ragrade.llm import LLMOptions, create_llm

        llm = create_llm(llm_spec, LLMOptions(base_url=base_url))
    cases = [("none", "none"), ("rm3", "none"), ("none", "mmr"), ("none", "threshold"), ("none", "compress")]
    cases += [("rm3", "mmr+compress")]
    if llm is not None:
        cases += [("hyde", "none"), ("multi-query", "none"), ("none", "llm-rerank"), ("none", "llm-compress")]
    print(f"transforms: {len(docs)} demo docs -> {len(chunks)} chunks, {len(queries)} pseudo-queries, k={k}")
    with tempfile.TemporaryDirectory() as tmp:
        build_index(chunks, os.path.join(tmp, "idx"), IndexConfig())
        idx = load_index(os.path.join(tmp, "idx"))
        texts = [q for q, _ in queries]
        for ret_name in ("bm25", "dense"):
            ret = idx.retriever(ret_name)
            ret.retrieve(texts[:4], k)  # warm-up (model load)
            base_t = None
            for query, post in cases:
                pipe = build_pipeline(idx, ret, query, post, llm=llm)
                pipe.run(texts[:2], k)
                t, res = timed(lambda p=pipe: p.run(texts, k))
                golds = [gold for _, gold in queries]
                hit = float(np.mean([g in {h.doc_id for h in r.hits} for r, g in zip(res, golds, strict=True)]))
                fails = sum(1 for r in res if r.error)
                base_t = t if base_t is None else base_t
                label = f"{ret_name} query={query} post={post}"
                print(
                    f"  {label:<40} hit@{k} {hit:.3f} | {1000 * t / len(texts):7.2f} ms/query | "
                    f"latency ratio {t / base_t:5.2f} | rewrite failures {fails}"
                )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=3000, help="demo documents to chunk")
    ap.add_argument("--passages", type=int, default=192, help="passages for the dense encoding comparison")
    ap.add_argument("--queries", type=int, default=2000, help="BM25 queries")
    ap.add_argument("--ann-n", type=int, default=10000, help="vectors for the ANN comparison (0 skips it)")
    ap.add_argument("--embedders", default="minilm,minilm-onnx,minilm-bf16", help="paths to compare")
    ap.add_argument("--tx-queries", type=int, default=300, help="queries for the transform comparison (0 skips)")
    ap.add_argument("--tx-docs", type=int, default=300, help="demo documents indexed for the transform comparison")
    ap.add_argument("--tx-k", type=int, default=3, help="k of the transform comparison")
    ap.add_argument("--llm", default=None, help="PROVIDER/MODEL for the LLM transforms (skipped without)")
    ap.add_argument("--llm-base-url", default=None, help="OpenAI-compatible server for --llm")
    ap.add_argument("--only", choices=["bm25", "dense", "ann", "transforms"], default=None, help="run one part")
    args = ap.parse_args()
    if args.only == "transforms":
        bench_transforms(args.tx_docs, args.tx_queries, args.tx_k, args.llm, args.llm_base_url)
        return
    texts, what = corpus_texts(args.docs)
    print(what)
    bench_bm25(texts, args.queries)
    ref = bench_dense(texts, args.passages, [s for s in args.embedders.split(",") if s])
    if args.ann_n > 0:
        bench_ann(ref, args.ann_n)
    if args.tx_queries > 0:
        bench_transforms(args.tx_docs, args.tx_queries, args.tx_k, args.llm, args.llm_base_url)


if __name__ == "__main__":
    main()
