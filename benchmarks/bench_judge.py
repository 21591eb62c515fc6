"""BERTScore throughput: ragrade's judge wrapper against bert-score's BERTScorer called directly.

    .venv/bin/python benchmarks/bench_judge.py [--pairs 200] [--layer 6]

Prints pairs per second for both and our overhead as a ratio (goal: <= 1.10).
"""

from __future__ import annotations

import argparse
import os
import random
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def _pairs(n: int, seed: int = 0) -> tuple[list[str], list[str]]:
    rng = random.Random(seed)
    words = [
        "river",
        "tower",
        "library",
        "museum",
        "engine",
        "protocol",
        "theorem",
        "harbour",
        "castle",
        "orbit",
        "enzyme",
        "statute",
        "treaty",
        "glacier",
        "volcano",
        "lattice",
    ]
    cands = [" ".join(rng.choice(words) for _ in range(rng.randint(8, 30))) for _ in range(n)]
    refs = [" ".join(rng.choice(words) for _ in range(rng.randint(8, 30))) for _ in range(n)]
    return cands, refs


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=200)
    ap.add_argument("--layer", type=int, default=6)
    args = ap.parse_args()
    from bert_score import BERTScorer

    from ragrade.judge.bertscore import BertScore, BertScoreConfig, resolve_model_path

    cands, refs = _pairs(args.pairs)
    ours = BertScore(BertScoreConfig(num_layers=args.layer))
    direct = BERTScorer(
        model_type=resolve_model_path("minilm"), num_layers=args.layer, lang="en", device="cpu", nthreads=0
    )
    ours.score(cands[:8], [[r] for r in refs[:8]])  # warm-up
    direct.score(cands[:8], refs[:8])
    t0 = time.perf_counter()
    direct.score(cands, refs, batch_size=32)
    t_direct = time.perf_counter() - t0
    t0 = time.perf_counter()
    ours.score(cands, [[r] for r in refs])
    t_ours = time.perf_counter() - t0
    print(f"bert-score direct: {args.pairs / t_direct:.1f} pairs/s")
    print(f"ragrade judge:     {args.pairs / t_ours:.1f} pairs/s")
    print(f"overhead ratio (ours / direct time): {t_ours / t_direct:.2f}")


if __name__ == "__main__":
    main()
