"""The Hugging Face backend on a tiny random model with a tokenizer trained here (no download)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.support.typed import narrow, some

from ragrade.errors import ConfigError
from ragrade.llm import GenerationRequest, LoglikelihoodRequest, Message, create_llm, generate, loglikelihood
from ragrade.llm.hf import HFLLM
from ragrade.llm.options import LLMOptions

TEXT = [
    "The capital of France is Paris and the capital of Italy is Rome.",
    "Water boils at 100 degrees Celsius at sea level.",
    "The quick brown fox jumps over the lazy dog near the river bank.",
    "Section 12 of the lease says the tenant pays 450 euros every month.",
] * 20


def build_tiny_model(folder: str | Path) -> str:
    """A 2-layer Llama with random weights and a byte-level BPE tokenizer trained on TEXT."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300, special_tokens=["<s>", "</s>", "<pad>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(TEXT, trainer)
    fast = PreTrainedTokenizerFast(  # type: ignore[no-untyped-call]  # an untyped constructor in transformers
        tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>"
    )
    fast.save_pretrained(folder)
    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=len(fast),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        bos_token_id=fast.bos_token_id,
        eos_token_id=fast.eos_token_id,
        pad_token_id=fast.pad_token_id,
    )
    LlamaForCausalLM(cfg).save_pretrained(folder)
    return str(folder)


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> str:
    return build_tiny_model(tmp_path_factory.mktemp("tiny-llama"))


def test_shared_prefix_equals_per_choice(tiny_model: str) -> None:
    shared = narrow(create_llm(f"hf/{tiny_model}", cache=False, loglikelihood_method="shared-prefix"), HFLLM)
    naive = narrow(create_llm(f"hf/{tiny_model}", cache=False, loglikelihood_method="per-choice"), HFLLM)
    reqs = [
        LoglikelihoodRequest("The capital of France is ", ("Paris", "Rome", "the river bank", "450 euros")),
        LoglikelihoodRequest("Water boils at", (" 100 degrees", " 12", " Celsius at sea level.", "")),
        LoglikelihoodRequest("", ("The quick", " fox")),
    ]
    a, b = loglikelihood(shared, reqs), loglikelihood(naive, reqs)
    for ra, rb in zip(a, b, strict=True):
        assert ra.ok and rb.ok, (ra.error, rb.error)
        assert ra.method == "shared-prefix" and rb.method == "per-choice"
        assert ra.token_counts == rb.token_counts
        assert ra.logprobs == pytest.approx(rb.logprobs, abs=1e-4)
    assert some(a[1].logprobs)[3] == 0.0 and some(a[1].token_counts)[3] == 0
    assert all(x < 0 for x in some(a[0].logprobs))
    # one context pass per question instead of one per choice
    assert shared.forwards.tokens < naive.forwards.tokens


def test_shared_prefix_saves_forwards_on_long_context(tiny_model: str) -> None:
    shared = narrow(  # max_batch=2 also exercises copies of the context's cache
        create_llm(f"hf/{tiny_model}", cache=False, max_batch=2, loglikelihood_method="shared-prefix"), HFLLM
    )
    naive = narrow(create_llm(f"hf/{tiny_model}", cache=False, loglikelihood_method="per-choice"), HFLLM)
    ctx = " ".join(TEXT[:12])
    req = [LoglikelihoodRequest(ctx, (" Paris", " Rome is", " 100", " lazy dog"))]
    [ra], [rb] = loglikelihood(shared, req), loglikelihood(naive, req)
    assert ra.logprobs == pytest.approx(rb.logprobs, abs=1e-4)
    assert naive.forwards.tokens >= 3 * shared.forwards.tokens


def test_generation_and_cache(tiny_model: str, llm_cache_dir: Path) -> None:
    llm = create_llm(f"hf/{tiny_model}")
    reqs = [
        GenerationRequest(prompt="The capital of", max_tokens=5),
        GenerationRequest(messages=(Message("user", "Water boils at"),), max_tokens=3),
    ]
    out = generate(llm, reqs)
    assert all(c.ok for c in out), [c.error for c in out]
    assert out[0].usage.completion_tokens <= 5 and out[0].usage.prompt_tokens > 0
    again = generate(llm, reqs)
    assert [c.text for c in again] == [c.text for c in out] and all(c.cached for c in again)
    assert llm.describe()["provider"] == "hf"


def test_missing_folder_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no model folder"):
        create_llm(f"hf/{tmp_path / 'nope'}")
    with pytest.raises(ConfigError, match=r"cannot use the LLM option\(s\) base_url \(for openai\)"):
        create_llm(f"hf/{tmp_path}", LLMOptions(base_url="http://x"))
