"""Batched prefix-tree scoring in the hf backend: equal to one request at a time, whatever the batch.

A tiny random Llama (built here, no download) in float32: the batched scores must equal scoring each
request alone to 1e-5 nats, with mixed lengths, shared prefixes across requests, an out-of-memory split and
prefix sharing switched off; and the batcher must merge concurrent callers into one batch.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from tests.llm.test_llm_hf import TEXT, build_tiny_model
from tests.support.typed import narrow, some

from ragrade.errors import ConfigError
from ragrade.llm import LoglikelihoodRequest, create_llm, loglikelihood
from ragrade.llm.hf import HFLLM
from ragrade.llm.hf_tree import Pass, TreeScorer
from ragrade.llm.options import LLMOptions
from ragrade.llm.prefix_tree import Item, Row

SYSTEM = "Answer the question with the passage. " + TEXT[0] + " "


def _requests() -> list[LoglikelihoodRequest]:
    """Mixed lengths; several share a long system prompt, two share a whole context, one has an empty option."""
    reqs = []
    for n in range(9):
        passage = " ".join(TEXT[n % 4 : n % 4 + 1 + n % 3])
        ctx = f"{SYSTEM}Passage: {passage} Question {n}: what is it? Answer:"
        reqs.append(LoglikelihoodRequest(ctx, (" Paris", " the lazy dog near", " 100 degrees", " 450 euros")))
    reqs.append(LoglikelihoodRequest(reqs[0].context, (" Rome", " Paris", "")))  # same context, other options
    reqs.append(LoglikelihoodRequest("Water boils at", (" 100", " 12 degrees Celsius at sea level.")))
    reqs.append(LoglikelihoodRequest("", ("The quick", " fox")))
    return reqs


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> str:
    return build_tiny_model(tmp_path_factory.mktemp("tiny-llama-batch"))


def _llm(model: str, **kw: Any) -> HFLLM:
    return narrow(create_llm(f"hf/{model}", cache=False, **kw), HFLLM)


def _alone(llm: HFLLM, reqs: list[LoglikelihoodRequest]) -> list[list[float]]:
    """Each request scored in a call of its own (its own batch)."""
    return [some(loglikelihood(llm, [r])[0].logprobs) for r in reqs]


def test_batched_equals_one_at_a_time_and_per_choice(tiny: str) -> None:
    reqs = _requests()
    batched = _llm(tiny)
    out = loglikelihood(batched, reqs)
    assert all(r.ok and r.method == "prefix-tree" for r in out), [r.error for r in out]
    alone = _alone(_llm(tiny), reqs)
    naive = loglikelihood(_llm(tiny, loglikelihood_method="per-choice"), reqs)
    for r, a, n in zip(out, alone, naive, strict=True):
        assert some(r.logprobs) == pytest.approx(a, abs=1e-5)
        assert some(r.logprobs) == pytest.approx(some(n.logprobs), abs=1e-4)  # an independent reference
        assert r.token_counts == n.token_counts
    assert some(out[9].logprobs)[2] == 0.0  # the empty option
    stats = batched.tree.stats
    # one call of 12 requests: a few passes, far fewer positions than one full sequence per option
    assert stats.forward_passes <= 2 and stats.requests == len(reqs)
    assert stats.token_positions < 0.5 * stats.plain_positions
    scoring = batched.describe()["scoring"]
    assert isinstance(scoring, dict) and scoring["plain_positions"] == stats.plain_positions


def test_sharing_on_and_off_give_the_same_numbers(tiny: str) -> None:
    reqs = _requests()
    shared, unshared = _llm(tiny), _llm(tiny)
    unshared.tree.share = False
    a, b = loglikelihood(shared, reqs), loglikelihood(unshared, reqs)
    for ra, rb in zip(a, b, strict=True):
        assert some(ra.logprobs) == pytest.approx(some(rb.logprobs), abs=1e-5)
    # the shared system prompt and the repeated context are computed once per row, not once per request
    assert shared.tree.stats.token_positions < unshared.tree.stats.token_positions


def test_small_budget_many_passes_same_numbers(tiny: str) -> None:
    reqs = _requests()
    big, small = _llm(tiny), _llm(tiny, batch_tokens=64)
    a, b = loglikelihood(big, reqs), loglikelihood(small, reqs)
    assert small.tree.stats.forward_passes > big.tree.stats.forward_passes
    for ra, rb in zip(a, b, strict=True):
        assert some(ra.logprobs) == pytest.approx(some(rb.logprobs), abs=1e-5)


class _Recorder(TreeScorer):
    """Records the order of launches and collections."""

    events: list[str]

    def launch(self, rows: Any) -> Pass:
        self.events.append("launch")
        return super().launch(rows)

    def collect(self, flight: Pass) -> list[list[list[float]]]:
        self.events.append("collect")
        return super().collect(flight)


def test_the_next_pass_is_queued_before_the_last_is_read(tiny: str) -> None:
    reqs = _requests()
    expected = loglikelihood(_llm(tiny), reqs)
    llm = _llm(tiny, batch_tokens=64)
    rec = _Recorder(llm.lm, llm._torch, llm.device, budget=64)
    llm.tree = rec
    rec.events = []
    loglikelihood(llm, reqs[:1])  # the once-per-model check runs here
    rec.events = []
    out = loglikelihood(llm, reqs)
    passes = rec.events.count("launch")
    assert passes >= 2 and rec.events.count("collect") == passes
    # one pass always queued ahead of the one being read back
    assert rec.events == ["launch"] + ["launch", "collect"] * (passes - 1) + ["collect"]
    for r, e in zip(out, expected, strict=True):
        assert some(r.logprobs) == pytest.approx(some(e.logprobs), abs=1e-5)
    seconds = rec.stats.as_dict()
    assert seconds["launch_s"] > 0 and "wait_s" in seconds and "plan_s" in seconds and seconds["lead_s"] > 0


def _many(n: int) -> list[LoglikelihoodRequest]:
    """``n`` requests of mixed lengths, each with its own question (more than two chunks' worth)."""
    base = _requests()
    return [
        LoglikelihoodRequest(f"{r.context} ({k})", r.continuations) for k in range(n) for r in base[k % 12 : k % 12 + 1]
    ]


def test_a_streamed_call_plans_the_next_chunk_while_passes_are_queued(tiny: str) -> None:
    reqs = _many(300)
    expected = loglikelihood(_llm(tiny), reqs)  # one chunk (the CPU's default)
    llm = _llm(tiny, batch_tokens=512)
    rec = _Recorder(llm.lm, llm._torch, llm.device, budget=512)
    llm.tree, llm.stream_chunks, rec.events = rec, True, []
    loglikelihood(llm, reqs[:1])  # the once-per-model check runs here
    rec.events = []
    encode = llm._encode_all

    def recorded(reqs: Sequence[LoglikelihoodRequest]) -> list[Item | str]:
        rec.events.append(f"encode {len(reqs)}")
        return encode(reqs)

    llm._encode_all = recorded  # type: ignore[method-assign]
    out = loglikelihood(llm, reqs)
    chunks = [e for e in rec.events if e.startswith("encode")]
    assert len(chunks) >= 3 and chunks[0] == "encode 64"  # a small first chunk, then larger ones
    assert sum(int(e.split()[1]) for e in chunks) == len(reqs)
    # the device gets its first pass after the first chunk alone, and later chunks are encoded while passes
    # are queued (a launch is followed by an encode before the pass before it is read back)
    assert rec.events[:2] == ["encode 64", "launch"]
    later = [i for i, e in enumerate(rec.events) if e.startswith("encode")][1:]
    assert all(rec.events[i - 1] == "launch" for i in later)
    assert rec.events.count("launch") == rec.events.count("collect")
    assert rec.stats.requests == len(reqs) + 1
    for r, e in zip(out, expected, strict=True):
        assert r.ok and r.method == "prefix-tree"
        assert some(r.logprobs) == pytest.approx(some(e.logprobs), abs=1e-5)


def test_a_stop_during_a_streamed_call_counts_every_request(tiny: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import ragrade.llm.hf as hf_module

    reqs = _many(300)
    llm = _llm(tiny, batch_tokens=512)
    llm.stream_chunks = True
    loglikelihood(llm, reqs[:1])
    launched = {"n": 0}
    launch = llm.tree.launch

    def counted(rows: Any) -> Pass:
        launched["n"] += 1
        return launch(rows)

    llm.tree.launch = counted  # type: ignore[method-assign]
    monkeypatch.setattr(hf_module, "_stopping", lambda: launched["n"] >= 2)
    out = loglikelihood(llm, reqs)
    assert len(out) == len(reqs)
    stopped = [r for r in out if not r.ok]
    assert stopped and all(r.error == "stopped before this request was scored" for r in stopped)
    assert 0 < sum(r.ok for r in out) < len(reqs)  # the two passes queued were read back, nothing else ran
    assert launched["n"] == 2


class _OOMScorer(TreeScorer):
    """Raises torch's out-of-memory error when the passes in flight would hold more than ``limit`` padded
    positions (a simulated card: a pass holds its memory from launch until its results are collected)."""

    limit = 0
    held = 0
    peak = 0

    def launch(self, rows: Any) -> Pass:
        size = len(rows) * max(len(r) for r in rows)
        if self.held + size > self.limit:
            import torch

            raise torch.OutOfMemoryError(f"simulated: {len(rows)} rows, {size} positions, {self.held} held")
        self.held += size
        self.peak = max(self.peak, self.held)
        return super().launch(rows)

    def collect(self, flight: Pass) -> list[list[list[float]]]:
        self.held -= len(flight.rows) * max(len(r) for r in flight.rows)
        return super().collect(flight)


def _with_oom_scorer(llm: HFLLM, limit: int) -> _OOMScorer:
    scorer = _OOMScorer(llm.lm, llm._torch, llm.device, budget=llm.tree.budget)
    scorer.limit = limit
    llm.tree = scorer
    return scorer


def test_out_of_memory_halves_the_batch_and_loses_nothing(tiny: str) -> None:
    reqs = _requests()
    expected = loglikelihood(_llm(tiny), reqs)
    llm = _llm(tiny)
    longest = max(len(r) for r in _rows(llm, reqs))
    scorer = _with_oom_scorer(llm, limit=2 * longest)
    out = loglikelihood(llm, reqs)
    assert scorer.stats.oom_splits >= 1 and scorer.budget < 8192
    for r, e in zip(out, expected, strict=True):
        assert r.ok, r.error
        assert some(r.logprobs) == pytest.approx(some(e.logprobs), abs=1e-5)


def test_a_row_that_never_fits_fails_its_requests_only(tiny: str) -> None:
    reqs = _requests()
    llm = _llm(tiny)
    rows = _rows(llm, reqs)
    longest = max(len(r) for r in rows)
    _with_oom_scorer(llm, limit=longest - 1)  # the longest row cannot run even alone
    out = loglikelihood(llm, reqs)
    assert len(out) == len(reqs)
    failed = [r for r in out if not r.ok]
    assert failed and all("out of memory" in some(r.error) for r in failed)
    assert any(r.ok for r in out)  # shorter rows still ran


def test_the_budget_grows_back_after_out_of_memory_but_never_past_what_failed(tiny: str) -> None:
    from ragrade.llm.hf_tree import GROW_AFTER

    reqs = _requests()
    llm = _llm(tiny)
    start = llm.tree.budget
    longest = max(len(r) for r in _rows(llm, reqs))
    scorer = _with_oom_scorer(llm, limit=2 * longest)  # a shortage: the first big pass does not fit
    loglikelihood(llm, reqs)
    assert scorer.stats.oom_splits >= 1
    low, ceiling = scorer.budget, scorer._ceiling
    assert ceiling is not None and low < start
    scorer.limit = 1 << 30  # the shortage is over
    for _ in range(4 * GROW_AFTER):
        out = loglikelihood(llm, reqs[:1])  # one small pass per call: each counts towards growing back
        assert out[0].ok
    assert scorer.budget > low  # it grew back
    assert scorer.budget <= min(start, int(0.9 * ceiling))  # but never to a size that ran out of memory


class _FailingScorer(TreeScorer):
    """Raises a device error (not out of memory) on any pass that holds request ``bad`` (as cuDNN's attention
    did on some shapes)."""

    bad = -1

    def launch(self, rows: Any) -> Pass:
        if any(self.bad in r.items for r in rows):
            raise RuntimeError("Expected mha_graph.execute(...).is_good() to be true, but got false.")
        return super().launch(rows)


def test_a_failed_pass_makes_its_requests_missing_and_the_rest_go_on(tiny: str) -> None:
    reqs = _requests()
    expected = _alone(_llm(tiny), reqs)
    llm = _llm(tiny, batch_tokens=1)  # one row per pass
    scorer = _FailingScorer(llm.lm, llm._torch, llm.device, budget=1)
    scorer.bad = 3
    llm.tree = scorer
    out = loglikelihood(llm, reqs)
    assert len(out) == len(reqs)
    failed = [i for i, r in enumerate(out) if not r.ok]
    assert 3 in failed and len(failed) < len(reqs)  # the pass holding request 3, not the others
    assert all("forward pass failed: RuntimeError: Expected mha_graph" in some(out[i].error) for i in failed)
    assert scorer.stats.failed_passes >= 1
    for i, r in enumerate(out):
        if r.ok:
            assert some(r.logprobs) == pytest.approx(expected[i], abs=1e-5)


class _MaskIgnoringScorer(TreeScorer):
    """An architecture that ignores the tree's mask and positions: plain causal attention over each row, so an
    option sees its siblings before it."""

    def _gathered_logits(self, ids: Any, pos: Any, mask: Any, keep: Any) -> Any:
        logits = self.lm(input_ids=ids, use_cache=False).logits
        return logits.reshape(-1, logits.shape[-1]).index_select(0, keep).float()


def test_the_once_per_model_check_catches_a_model_that_ignores_the_mask(tiny: str) -> None:
    reqs = _requests()
    expected = _alone(_llm(tiny), reqs)
    llm = _llm(tiny)
    llm.tree = _MaskIgnoringScorer(llm.lm, llm._torch, llm.device, budget=llm.tree.budget)
    out = loglikelihood(llm, reqs)
    assert llm._tree_checked and "differ from full forwards" in llm._tree_checked
    assert all(r.ok and r.method == "shared-prefix" for r in out)  # fell back: one request at a time, exact
    for r, e in zip(out, expected, strict=True):
        assert some(r.logprobs) == pytest.approx(e, abs=1e-5)


def test_a_16_bit_check_tolerates_the_rounding_the_exact_methods_show_between_themselves(tiny: str) -> None:
    llm = _llm(tiny, dtype="bfloat16")
    reqs = _requests()[:3]
    probe = [Item(tuple(c), tuple(tuple(x) for x in o)) for c, o in (llm.encode_pair(r.context, r.continuations)
                                                                      for r in reqs)]  # fmt: skip
    full = {id(it): llm.per_choice_scores(list(it.ctx), [list(c) for c in it.conts]) for it in probe}
    spread = max(
        abs(a - b)
        for it in probe
        for a, b in zip(llm.shared_prefix_scores(list(it.ctx), [list(c) for c in it.conts]), full[id(it)], strict=True)
    )
    assert llm._check_tolerance(probe, full) == pytest.approx(max(0.25, 4 * spread))
    assert _llm(tiny)._check_tolerance(probe, full) == 1e-3  # float32: the fixed bound


def _rows(llm: HFLLM, reqs: list[LoglikelihoodRequest]) -> list[Row]:
    from ragrade.llm.prefix_tree import plan_rows

    items = []
    for r in reqs:
        ctx, conts = llm.encode_pair(r.context, r.continuations)
        items.append(Item(tuple(ctx), tuple(tuple(c) for c in conts)))
    return plan_rows(items, 1 << 20)


def test_concurrent_callers_are_merged_into_one_batch(tiny: str) -> None:
    reqs = _requests()
    llm = _llm(tiny)

    async def many() -> list[list[float]]:
        parts = await asyncio.gather(*(llm.aloglikelihood([r]) for r in reqs))
        return [some(p[0].logprobs) for p in parts]

    from ragrade.llm.base import run_sync

    got = run_sync(many())
    assert len(llm._batcher.batches) < len(reqs)  # twelve callers, fewer batches
    assert max(llm._batcher.batches) > 1
    for g, a in zip(got, _alone(_llm(tiny), reqs), strict=True):
        assert g == pytest.approx(a, abs=1e-5)


def test_device_auto_is_the_cpu_here_and_bad_devices_fail_before_loading(tiny: str, tmp_path: Path) -> None:
    llm = _llm(tiny)
    assert llm.device == "cpu" and llm.dtype == "float32"
    assert llm.placement.asked_device == "auto"
    import torch

    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match=r"device 'cuda' is not available here \(available: .*cpu"):
            create_llm(f"hf/{tiny}", LLMOptions(device="cuda"))  # refused before the weights load
    with pytest.raises(ConfigError, match="unknown dtype 'float8'"):
        create_llm(f"hf/{tiny}", dtype="float8")
    with pytest.raises(ConfigError, match="unknown device 'tpu'"):
        create_llm(f"hf/{tiny}", device="tpu")


def test_exam_take_fills_the_batches_and_records_the_positions(tiny: str, tmp_path: Path) -> None:
    """Through `exam take`: the local executor runs enough shards at once that the batcher merges several
    shards' requests, and the manifest records the device and the positions computed against the plain count."""
    from tests.run.fakes import make_exam

    from ragrade.cli.main import main
    from ragrade.run.manifest import read_manifest
    from ragrade.run.summary import read_responses

    exam, out = tmp_path / "exam.jsonl", tmp_path / "run"
    make_exam(exam, 24)
    args = ["exam", "take", str(exam), "--out", str(out), "--retrievers", "closed,oracle", "--llm", f"hf/{tiny}"]
    assert main([*args, "--shard-size", "4", "--device", "cpu", "--no-cache"]) == 0
    rows = read_responses(out / "responses.parquet")
    assert len(rows) == 48 and rows["error"].isna().all() and set(rows["ll_source"]) == {"prefix-tree"}
    manifest = read_manifest(out)
    assert manifest["executor"]["parallel"] >= 16  # 64 requests wanted in flight / 4 per shard
    [llm] = [v for k, v in manifest["components"].items() if k.startswith("llm:")]
    assert llm["placement"]["device"] == "cpu" and llm["placement"]["asked_device"] == "cpu"
    scoring = llm["scoring"]
    assert scoring["requests"] == 48 and scoring["largest_batch_requests"] > 4  # more than one shard per batch
    assert 0 < scoring["token_positions"] < scoring["plain_positions"]
    assert main([*args, "--device", "cuda:7"]) == 2  # no such GPU here (nor any): refused before loading


def test_ask_loads_a_local_model_once(tiny: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`ask --llm hf/...` without a query transform: one model in memory, not one more for rewriting."""
    import ragrade as rg
    from ragrade.corpus.types import Document

    docs = [Document(id=f"d{i}", text=t, source=f"{i}.txt") for i, t in enumerate(TEXT[:4])]
    index = rg.build_index(docs, tmp_path / "index", dense=False)
    capsys.readouterr()
    assistant = rg.open_assistant(index, retriever="bm25", k=1, llm=f"hf/{tiny}")
    loads = [line for line in capsys.readouterr().err.splitlines() if " runs on " in line]
    assert len(loads) == 1, loads
    assert assistant is not None


def test_a_cut_off_gguf_file_is_one_clear_error(tmp_path: Path) -> None:
    import struct

    pytest.importorskip("gguf")
    path = tmp_path / "cut.gguf"
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 1, 5) + b"\x05\x00")  # a header that stops mid-field
    with pytest.raises(ConfigError, match=r"cut\.gguf: cannot load this GGUF file: its header is cut off"):
        create_llm(f"hf/{path}")
