"""Shared-prefix vs per-choice log-likelihood on the HF backend: token positions forwarded and time.

A small random Llama (built here, no download) scores Q questions with a ~500-token context and 4 choices.
Goal: >= 3x fewer token forwards for shared-prefix. Also checks both methods agree to 1e-4.

    .venv/bin/python benchmarks/bench_llm_hf.py [--questions 10] [--context-tokens 500] [--hidden 128]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--questions", type=int, default=10)
    ap.add_argument("--context-tokens", type=int, default=500)
    ap.add_argument("--hidden", type=int, default=128)
    args = ap.parse_args()

    import torch
    from tests.llm.test_llm_hf import TEXT, build_tiny_model
    from transformers import LlamaConfig, LlamaForCausalLM

    from ragrade.llm import LLMOptions, LoglikelihoodRequest, create_llm, loglikelihood
    from ragrade.llm.hf import HFLLM

    with tempfile.TemporaryDirectory() as tmp:
        build_tiny_model(tmp)
        cfg = LlamaConfig.from_pretrained(tmp)
        cfg.hidden_size, cfg.intermediate_size, cfg.num_hidden_layers = args.hidden, 4 * args.hidden, 4
        torch.manual_seed(0)
        LlamaForCausalLM(cfg).save_pretrained(tmp)
        shared = create_llm(f"hf/{tmp}", LLMOptions(cache=False))
        naive = create_llm(f"hf/{tmp}", LLMOptions(cache=False, loglikelihood_method="per-choice"))
        assert isinstance(shared, HFLLM) and isinstance(naive, HFLLM)
        words = " ".join(TEXT).split()
        reqs = []
        for q in range(args.questions):
            ctx = " ".join(words[q : q + args.context_tokens // 4])
            while len(shared.encode_pair(ctx, [""])[0]) < args.context_tokens:
                ctx += " " + words[len(ctx) % len(words)]
            reqs.append(LoglikelihoodRequest(ctx, (" Paris", " the lazy dog", " 100 degrees", " 450 euros")))
        ctx_len = len(shared.encode_pair(reqs[0].context, [""])[0])
        t0 = time.perf_counter()
        a = loglikelihood(shared, reqs)
        t_shared = time.perf_counter() - t0
        t0 = time.perf_counter()
        b = loglikelihood(naive, reqs)
        t_naive = time.perf_counter() - t0
    diff = max(
        abs(x - y)
        for ra, rb in zip(a, b, strict=True)
        for x, y in zip(ra.logprobs or [], rb.logprobs or [], strict=True)
    )
    print(f"questions={args.questions} context_tokens={ctx_len} choices=4 hidden={args.hidden}")
    print(f"per-choice:    forwards={naive.forwards.calls} token_positions={naive.forwards.tokens} time={t_naive:.2f}s")
    print(
        f"shared-prefix: forwards={shared.forwards.calls} token_positions={shared.forwards.tokens} time={t_shared:.2f}s"
    )
    print(
        f"token ratio={naive.forwards.tokens / shared.forwards.tokens:.2f}x (goal >= 3x) "
        f"time ratio={t_naive / t_shared:.2f}x max |diff|={diff:.2e}"
    )


if __name__ == "__main__":
    main()
