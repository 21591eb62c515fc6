"""CPU seconds per 1,000 sentences of the demo corpus: plain ``embed`` against ``embed_fixed`` (fixed shapes).

Usage: ``python benchmarks/bench_embed_fixed.py [--n 1000] [--call 320] [--repeat 2]``. Embeds the first ``n``
distinct sentences of the demo corpus's documents (the offline student's texts) in calls of ``call`` texts,
with the default embedder: plain batched ``embed`` (the baseline), ``embed_fixed`` at torch's default thread
count (previous), pinned to one thread (current) and with widths in multiples of 16 tokens, all in this
process; prints CPU seconds
per 1,000 sentences (best of ``repeat``), the ratio to plain ``embed``, the fill-up and padding overheads,
and checks that each text's fixed-shape vector is the same in a different batch.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable, Sequence

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np
import numpy.typing as npt

Embed = Callable[[Sequence[str]], npt.NDArray[np.float32]]


def _sentences(n: int) -> list[str]:
    from ragrade.corpus.demo import build_demo_corpus
    from ragrade.llm.offline import sentences

    seen: dict[str, None] = {}
    for doc in build_demo_corpus():
        for s in sentences(doc.text):
            seen.setdefault(s)
            if len(seen) >= n:
                return list(seen)
    return list(seen)


def _cpu_per_1000(embed: Embed, texts: list[str], call: int, repeat: int) -> tuple[float, float]:
    best_cpu = best_wall = float("inf")
    for _ in range(repeat):
        c0, t0 = time.process_time(), time.perf_counter()
        for start in range(0, len(texts), call):
            embed(texts[start : start + call])
        best_cpu = min(best_cpu, time.process_time() - c0)
        best_wall = min(best_wall, time.perf_counter() - t0)
    return best_cpu * 1000 / len(texts), best_wall * 1000 / len(texts)


def _overheads(lengths: list[int], limit: int, call: int, shape: object) -> tuple[float, float]:
    """(padded token slots / real tokens, rows run / texts) of fixed-shape batching."""
    from ragrade.embedding.batching import FixedShape, fixed_shape_batches

    assert isinstance(shape, FixedShape)
    slots = rows = 0
    for start in range(0, len(lengths), call):
        for _idx, width in fixed_shape_batches(lengths[start : start + call], limit, shape):
            slots += shape.batch * width
            rows += shape.batch
    return slots / sum(min(n, limit) for n in lengths), rows / len(lengths)


def main() -> int:
    import torch

    from ragrade.embedding.batching import DEFAULT_SHAPE, FixedShape
    from ragrade.embedding.embed import SentenceTransformerEmbedder, default_embedder

    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--n", type=int, default=1000, help="sentences")
    ap.add_argument("--call", type=int, default=320, help="texts per embed call")
    ap.add_argument("--repeat", type=int, default=2, help="best of this many timings")
    args = ap.parse_args()
    texts = _sentences(args.n)
    emb = default_embedder()
    assert isinstance(emb, SentenceTransformerEmbedder), "this benchmark measures the sentence-transformers path"
    tok = emb._model.tokenizer
    limit = int(emb._model.max_seq_length or 256)
    lengths = [len(ids) for ids in tok(texts, truncation=True, max_length=limit)["input_ids"]]
    from ragrade.embedding import batching

    threads = torch.get_num_threads()

    def unpinned(t: Sequence[str]) -> npt.NDArray[np.float32]:
        pinned, batching.FIXED_THREADS = batching.FIXED_THREADS, threads
        try:
            return emb.embed_fixed(t, DEFAULT_SHAPE)
        finally:
            batching.FIXED_THREADS = pinned

    by16 = FixedShape(batch=16, step=16)
    variants: list[tuple[str, Embed, FixedShape | None]] = [
        ("plain embed", emb.embed, None),
        (f"embed_fixed, {threads} threads (previous)", unpinned, DEFAULT_SHAPE),
        (f"embed_fixed, {batching.FIXED_THREADS} thread (current)", emb.embed_fixed, DEFAULT_SHAPE),
        ("embed_fixed, widths x16, 1 thread", lambda t: emb.embed_fixed(t, by16), by16),
    ]
    emb.embed(texts[:32])  # warm up
    print(
        f"{len(texts)} demo-corpus sentences, {np.mean(lengths):.1f} tokens on average, calls of {args.call}, "
        f"{emb.name} ({'bf16' if emb.bf16 else 'fp32'}), torch threads {torch.get_num_threads()}, "
        f"load {os.getloadavg()[0]:.2f}"
    )
    base = 0.0
    print(f"{'variant':<48}{'CPU s/1k':>10}{'wall s/1k':>11}{'ratio':>8}{'pad':>7}{'fill':>7}")
    for label, embed, shape in variants:
        cpu, wall = _cpu_per_1000(embed, texts, args.call, args.repeat)
        base = base or cpu
        pad, fill = _overheads(lengths, limit, args.call, shape) if shape else (float("nan"), float("nan"))
        print(f"{label:<48}{cpu:>10.2f}{wall:>11.2f}{cpu / base:>8.2f}{pad:>7.2f}{fill:>7.2f}")
    print(f"load after: {' '.join(f'{x:.2f}' for x in os.getloadavg())} (ratios: CPU s against plain embed, same run)")
    sample = texts[:: max(1, len(texts) // 40)][:40]
    alone = np.stack([emb.embed_fixed([t])[0] for t in sample[:8]])
    mixed = emb.embed_fixed(sample[::-1] + texts[-50:])[: len(sample)][::-1]
    same = np.array_equal(alone, mixed[:8]) and np.array_equal(mixed, emb.embed_fixed(sample))
    print(f"vectors independent of companions (alone / reversed + 50 others / in order): {same}")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
