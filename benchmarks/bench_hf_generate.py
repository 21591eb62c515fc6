"""Batched greedy generation on the hf backend against one request at a time, in the same run.

A random-initialised Llama (built here from a config, no download) answers N greedy requests (prompts of
mixed lengths, up to ``--new`` new tokens each). The same requests are generated twice by ``hf/``: with
``max_batch 1`` (one ``generate`` call per request, what the backend did before batching) and with the
default batching; the texts must be equal (float32) and the ratio of wall-clock times is printed. In a 16-bit
dtype a text may part from its one-at-a-time twin where the two largest logits tie within the dtype's rounding
(a random model's logits are nearly flat); each such text's gap at the parting token is printed. This times
one component (the backend's generation), not a verb end to end.

    .venv/bin/python benchmarks/bench_hf_generate.py [--requests 48] [--new 24] [--hidden 256] [--layers 4]
        [--device auto] [--dtype float32]
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
    ap.add_argument("--requests", type=int, default=48)
    ap.add_argument("--new", type=int, default=24)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--dtype", default="float32")
    args = ap.parse_args()

    import torch
    from tests.llm.test_llm_hf import TEXT, build_tiny_model
    from transformers import LlamaConfig, LlamaForCausalLM

    from ragrade.llm import GenerationRequest, LLMOptions, create_llm, generate
    from ragrade.llm.hf import HFLLM

    words = " ".join(TEXT).split()
    reqs = [
        GenerationRequest(
            prompt=" ".join(words[(7 * n) % 40 :] * (1 + n % 6))[: 200 + 150 * (n % 6)], max_tokens=args.new
        )
        for n in range(args.requests)
    ]
    with tempfile.TemporaryDirectory() as tmp:
        build_tiny_model(tmp)
        cfg = LlamaConfig.from_pretrained(tmp)
        cfg.hidden_size, cfg.intermediate_size, cfg.num_hidden_layers = args.hidden, 4 * args.hidden, args.layers
        cfg.num_attention_heads, cfg.num_key_value_heads = max(4, args.hidden // 64), max(2, args.hidden // 128)
        torch.manual_seed(0)
        LlamaForCausalLM(cfg).save_pretrained(tmp)
        opts = {"cache": False, "device": args.device, "dtype": args.dtype}
        one = create_llm(f"hf/{tmp}", LLMOptions(**opts, max_batch=1))
        batched = create_llm(f"hf/{tmp}", LLMOptions(**opts))
        assert isinstance(one, HFLLM) and isinstance(batched, HFLLM)
        generate(one, reqs[:2])  # warm both (first-call allocations)
        generate(batched, reqs[:2])
        t0 = time.perf_counter()
        a = generate(one, reqs)
        t_one = time.perf_counter() - t0
        t0 = time.perf_counter()
        b = generate(batched, reqs)
        t_batched = time.perf_counter() - t0
        prompt_tokens = [len(one._prompt_ids(r)) for r in reqs]
        stats = batched.generator.stats
        gaps = [
            _tie_gap(one, torch, r, x.text or "", y.text or "")
            for r, x, y in zip(reqs, a, b, strict=True)
            if x.text != y.text
        ]
    same = sum(x.text == y.text for x, y in zip(a, b, strict=True))
    shape = f"Llama {args.layers} layers, width {args.hidden}; torch threads {torch.get_num_threads()}"
    print(f"device {batched.device} {batched.dtype}; {shape}")
    lengths = f"prompts {min(prompt_tokens)}-{max(prompt_tokens)} tokens, up to {args.new} new tokens"
    print(f"{len(reqs)} greedy requests, {lengths}")
    print(f"one at a time: {t_one:.2f} s ({len(reqs) / t_one:.1f} req/s)")
    groups = stats.groups - 1  # the warm-up call was one group
    print(f"batched:       {t_batched:.2f} s ({len(reqs) / t_batched:.1f} req/s) in {groups} padded groups")
    print(f"speed-up (same run): {t_one / t_batched:.2f}x; identical texts {same}/{len(reqs)}")
    if gaps:
        known = sorted(g for g in gaps if g is not None)
        spread = f"median {known[len(known) // 2]:.4f}, largest {known[-1]:.4f}" if known else "none re-encoded"
        print(
            f"texts that differ: the gap between the top two logits where they part ({spread}; one-at-a-time's"
            f" prefix re-encoded, {len(known)} of {len(gaps)}): a near-tie that rounding between batch shapes flips"
        )
    if same != len(reqs) and args.dtype == "float32":
        sys.exit("batched generation differs from one request at a time in float32")


def _tie_gap(llm: object, torch: object, req: object, alone: str, batched: str) -> float | None:
    """The gap between the two largest logits (computed alone, in the model's dtype) at the first token where
    the two texts part: small where the texts differ only by a near-tie. None where the texts' re-encoded
    tokens do not show where they part."""
    from ragrade.llm.hf import HFLLM

    assert isinstance(llm, HFLLM)
    tok = llm.tokenizer
    ta, tb = tok(alone, add_special_tokens=False).input_ids, tok(batched, add_special_tokens=False).input_ids
    at = next((i for i, (x, y) in enumerate(zip(ta, tb, strict=False)) if x != y), None)
    if at is None:
        return None
    ids = llm._prompt_ids(req) + list(ta[:at])  # type: ignore[arg-type]
    with torch.inference_mode():  # type: ignore[attr-defined]
        logits = llm.lm(input_ids=torch.tensor([ids], device=llm.device)).logits[0, -1].float()  # type: ignore[attr-defined]
    top = torch.topk(logits, 2).values  # type: ignore[attr-defined]
    return float(top[0] - top[1])


if __name__ == "__main__":
    main()
