"""`qa generate --n N` reaches N when the corpus allows it, or says why not with counts per reason (issue 36.7)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from tests.support.openai_server import OpenAIServer

from ragrade.cli.main import main
from ragrade.corpus.files import write_chunks
from ragrade.corpus.types import Chunk
from ragrade.qa.generate import Funnel, QAGenConfig, generate_qa, next_batch


def _chunks(n: int) -> list[Chunk]:
    """``n`` prose chunks; every third says 'keep' (the fake LLM writes a grounded triplet only for those)."""
    out = []
    for i in range(n):
        mark = "keep" if i % 3 == 0 else "skip"
        name = "".join(chr(97 + int(d)) for d in f"{i:03d}")  # a distinct word per chunk: aaa, aab, ...
        text = (
            f"The {name} station ({mark}) records the river level every morning at {i + 5} minutes past six. The "
            f"readings of the {name} station are sent to the regional office, where they are checked."
        )
        out.append(Chunk(id=f"c{i}", doc_id=f"d{i}", text=text, start=0, end=len(text), strategy="test"))
    return out


def _responder(body: dict[str, Any]) -> str:
    prompt = body["messages"][-1]["content"]
    found = re.search(r"The (\w+) station \((keep|skip)\)", prompt)
    assert found is not None
    if found.group(2) == "skip":
        return '{"question": "Which planet has the most moons?", "answer": "Saturn"}'  # not in the passage
    return f'{{"question": "When does the {found.group(1)} station record the level?", "answer": "every morning"}}'


def test_the_llm_generator_keeps_asking_until_n_triplets_are_accepted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a third of the candidates is accepted: the old fixed draw of n x 2 + 5 = 25 chunks gave 9 of 10
    monkeypatch.setenv("RAGRADE_CACHE_DIR", str(tmp_path / "cache"))
    from ragrade.llm import create_llm

    with OpenAIServer(responder=_responder) as server:
        llm = create_llm("openai/test-model", base_url=server.base_url, api_key="sk-x")
        items, funnel = generate_qa(_chunks(90), llm, QAGenConfig(n=10, seed=0, min_chunk_chars=50, batch_size=8))
        asked = server.requests_by_path["/v1/chat/completions"]
    assert len(items) == 10 and funnel.accepted == 10 and funnel.shortfall() is None
    assert funnel.rejected == {"answer not found in passage": funnel.sampled - 10}
    # batches follow the acceptance rate: far fewer requests than the 55 allowed or the 90 chunks
    assert asked == funnel.sampled + funnel.unused and 25 < asked <= 40 and funnel.unused <= 2


def test_the_attempt_limit_bounds_the_requests_and_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGRADE_CACHE_DIR", str(tmp_path / "cache"))
    from ragrade.llm import create_llm

    with OpenAIServer(responder=_responder) as server:
        llm = create_llm("openai/test-model", base_url=server.base_url, api_key="sk-x")
        cfg = QAGenConfig(n=10, seed=0, min_chunk_chars=50, batch_size=8, oversample=1.0)
        items, funnel = generate_qa(_chunks(90), llm, cfg)
        assert server.requests_by_path["/v1/chat/completions"] == 15  # n x 1.0 + 5
    assert len(items) < 10
    text = funnel.shortfall()
    assert text is not None and text.startswith(f"{len(items)} of 10 requested triplets: the attempt limit")
    assert "n x oversample + 5 = 15" in text and f"answer not found in passage {15 - len(items)}" in text


def test_an_exhausted_pool_is_said_with_counts_per_reason(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    short = Chunk(id="short", doc_id="ds", text="Too short.", start=0, end=10, strategy="test")
    code = Chunk(id="code", doc_id="dc", text="x = [1, 2]\n" * 20, start=0, end=220, strategy="test")
    chunks = [*_chunks(6), short, code]
    path = tmp_path / "chunks.jsonl"
    write_chunks(path, chunks)
    out = tmp_path / "qa.jsonl"
    args = ["qa", "generate", str(path), "--n", "20", "--llm", "offline", "--out", str(out), "--min-chars", "50"]
    assert main(args) == 0
    err = capsys.readouterr().err
    # the offline generator tried every eligible chunk; the code chunk gave no question
    assert "ragrade: warning: 6 of 20 requested triplets: all 7 eligible chunks were tried" in err
    assert "7 of 8 chunks eligible (1 shorter than 50 characters)" in err and "no usable sentence 1" in err
    assert "too few eligible chunks or too many rejections" not in err


def test_the_offline_generator_tries_the_whole_pool() -> None:
    # one chunk in six is prose: the old fixed draw of n x 2 + 5 = 21 chunks could not give 8
    chunks = []
    for i, c in enumerate(_chunks(60)):
        chunks.append(
            c
            if i % 6 == 0
            else Chunk(id=c.id, doc_id=c.doc_id, text="y = {}\n" * 30, start=0, end=210, strategy="test")
        )
    items, funnel = generate_qa(chunks, None, QAGenConfig(n=8, seed=0, min_chunk_chars=50))
    assert len(items) == 8 and funnel.rejected["no usable sentence"] == funnel.sampled - 8
    assert funnel.sampled > 21


def test_next_batch_follows_the_acceptance_rate() -> None:
    cfg = QAGenConfig(n=10, batch_size=32)
    assert next_batch(Funnel(), cfg, 100) == 10  # nothing asked yet: what is needed
    assert next_batch(Funnel(sampled=10, accepted=5), cfg, 100) == 10  # half accepted: 5 more need 10
    assert next_batch(Funnel(sampled=10, accepted=0), cfg, 100) == 32  # none accepted yet: a full batch
    assert next_batch(Funnel(sampled=12, accepted=3), cfg, 100) == 28  # 7 more at 1 in 4
    assert next_batch(Funnel(sampled=12, accepted=3), cfg, 5) == 5  # no more than are left


def test_an_interruption_counts_every_answered_request(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the interruption line used to give the count at the start of the running batch (4 of 25 while 10 were
    # answered and cached); it now moves with each answer, as the progress display does
    monkeypatch.setenv("RAGRADE_CACHE_DIR", str(tmp_path / "cache"))
    from ragrade import interrupt
    from ragrade.llm import create_llm

    with OpenAIServer(responder=_responder) as server:
        llm = create_llm("openai/test-model", base_url=server.base_url, api_key="sk-x", concurrency=1)
        generate_qa(_chunks(30), llm, QAGenConfig(n=4, seed=0, min_chunk_chars=50, batch_size=8, oversample=1.0))
        asked = server.requests_by_path["/v1/chat/completions"]
    assert asked > 4  # more than one batch: the old count stopped at the last batch's start
    assert interrupt.message().startswith(f"interrupted: {asked} of ")
