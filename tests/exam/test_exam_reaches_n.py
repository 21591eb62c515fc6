"""The exam generator reaches ``n`` when the corpus allows it, or says in one line why not (issue 36.7).

LLM generation runs against the real fake OpenAI server of tests/support: every even chunk gets a good
question, every odd one a reply that is not a question, so half the candidates are kept.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from tests.exam.exam_helpers import synthetic_chunks
from tests.support.openai_server import OpenAIServer

from ragrade.corpus.types import Chunk
from ragrade.exam.config import ExamConfig, FilterConfig
from ragrade.exam.funnel import shortfall_line
from ragrade.exam.generate import ExamResult, generate_exam_full, next_round, request_cap

OFF = FilterConfig(mode="off")
WORDS = ["amber", "basalt", "cobalt", "dune", "ember", "fjord", "garnet", "harbor", "indigo", "jasper"]


def chunks(n: int) -> list[Chunk]:
    out = []
    for i in range(n):
        text = f"[chunk:{i}] The component number {i} of the platform is described here in enough words. " * 3
        out.append(Chunk(id=f"c{i:03d}", doc_id=f"d{i:03d}", text=text, start=0, end=len(text), strategy="t"))
    return out


def responder(body: dict[str, Any]) -> str:
    prompt = "\n".join(str(m.get("content", "")) for m in body["messages"])
    i = int(re.search(r"\[chunk:(\d+)\]", prompt).group(1))  # type: ignore[union-attr]
    if i % 2:
        return "The platform is large and has many parts that work together."  # no question, no choices
    w = WORDS[i % len(WORDS)]
    return (
        f"Question: Which port does the {w} service number {i} of the platform listen on?\n"
        f"A) {1000 + i}\nB) {2000 + i}\nC) {3000 + i}\nD) {4000 + i}\nCorrect Answer: A"
    )


def cfg(**kw: Any) -> ExamConfig:
    base: dict[str, Any] = dict(
        seed=1, min_chunk_chars=50, intra_candidate=OFF, extra_candidate=OFF, near_duplicate=OFF, oversample=1.0
    )
    return ExamConfig(**{**base, **kw})


def generate(srv: OpenAIServer, data: list[Chunk], config: ExamConfig, embedder: Any) -> ExamResult:
    from ragrade.llm import create_llm

    llm = create_llm("openai/test-model", base_url=srv.base_url, api_key="sk-test", cache=False, max_retries=0)
    return generate_exam_full(data, llm, config, embedder=embedder)


@pytest.fixture(scope="module")
def server() -> Any:
    with OpenAIServer(responder=responder) as srv:
        yield srv


def test_the_llm_generator_reaches_n_in_rounds_sized_by_the_kept_share(
    server: OpenAIServer, hash_embedder: Any
) -> None:
    server.reset_counters()
    res = generate(server, chunks(60), cfg(n=10), hash_embedder)
    assert len(res.questions) == 10 and res.funnel["stopped"] == "enough"
    assert res.funnel["rounds"] >= 2  # the first round (10 chunks) keeps about 5
    asked = res.funnel["chunks"]["asked"]
    assert asked == server.requests_total < 60  # not every chunk: only what the kept share said was needed
    assert shortfall_line(res.funnel) is None


def test_an_exhausted_pool_is_named_with_counts_per_reason(server: OpenAIServer, hash_embedder: Any) -> None:
    res = generate(server, chunks(12), cfg(n=10, max_rounds=10), hash_embedder)
    assert len(res.questions) == 6 and res.funnel["stopped"] == "pool"
    line = shortfall_line(res.funnel)
    assert line is not None and "\n" not in line
    assert line.startswith("6 of 10 requested questions: the pool is exhausted: all 12 eligible chunks were asked")
    ((reason, count),) = ((k, v) for k, v in res.funnel["reasons"].items())
    assert count == 6 and line.endswith(f"candidates removed: {reason} 6")


def test_the_request_cap_stops_the_llm_and_says_so(server: OpenAIServer, hash_embedder: Any) -> None:
    server.reset_counters()
    res = generate(server, chunks(60), cfg(n=10, max_requests=8, max_rounds=10), hash_embedder)
    kept = len(res.questions)
    assert server.requests_total == 8 and kept < 10 and res.funnel["stopped"] == "requests"
    line = str(shortfall_line(res.funnel))
    assert line.startswith(
        f"{kept} of 10 requested questions: the request cap was reached: 8 of 60 eligible chunks asked"
    )
    assert "(max_requests 8; raise --oversample or max_requests)" in line
    # the default cap: n x oversample x max_rounds
    assert request_cap(cfg(n=10, oversample=1.3, max_rounds=3)) == 39


def test_the_rounds_limit_is_named(server: OpenAIServer, hash_embedder: Any) -> None:
    res = generate(server, chunks(60), cfg(n=10, max_rounds=1, max_requests=100), hash_embedder)
    assert res.funnel["stopped"] == "rounds" and res.funnel["chunks"]["asked"] == 10
    assert "the rounds limit was reached: 10 of 60 eligible chunks asked in 1 round " in str(shortfall_line(res.funnel))


def test_the_cli_prints_the_shortfall_on_the_terminal(
    server: OpenAIServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ragrade.cli.main import main
    from ragrade.corpus.files import write_chunks

    src = tmp_path / "chunks.jsonl"
    write_chunks(src, chunks(12))
    cfg_file = tmp_path / "exam.toml"
    cfg_file.write_text(
        "[exam]\nmin_chunk_chars = 50\nmax_rounds = 10\n"
        + "".join(f'[exam.{name}]\nmode = "off"\n' for name in ("intra_candidate", "extra_candidate", "near_duplicate"))
    )
    args = ["exam", "generate", str(src), "--n", "10", "--llm", "openai/test-model", "--llm-base-url", server.base_url]
    rc = main(
        [
            *args,
            "--no-cache",
            "--embedder",
            f"openai:test-model@{server.base_url}",
            "--config",
            str(cfg_file),
            "--json",
            "--out",
            str(tmp_path / "e.jsonl"),
        ]
    )
    err = capsys.readouterr().err
    assert rc == 0, err
    warnings = [ln for ln in err.splitlines() if ln.startswith("ragrade: warning: exam generate:")]
    assert len(warnings) == 1
    assert "6 of 10 requested questions: the pool is exhausted: all 12 eligible chunks were asked" in warnings[0]


def test_the_offline_generator_reaches_n_whatever_the_rounds_limit(
    synth_chunks: list[Chunk], hash_embedder: Any
) -> None:
    res = generate_exam_full(
        synth_chunks, None, ExamConfig(n=50, seed=4, oversample=1.0, max_rounds=1), embedder=hash_embedder
    )
    assert len(res.questions) == 50 and res.funnel["rounds"] >= 2 and res.funnel["max_requests"] is None
    small = generate_exam_full(synthetic_chunks(60)[:10], None, ExamConfig(n=50, seed=4), embedder=hash_embedder)
    line = str(shortfall_line(small.funnel))
    kept = len(small.questions)
    assert line.startswith(
        f"{kept} of 50 requested questions: the pool is exhausted: all 10 eligible chunks were asked"
    )
    removed = {k: v for k, v in small.funnel["reasons"].items() if v}
    assert sum(removed.values()) == 10 - kept
    assert all(f"{k} {v}" in line for k, v in removed.items())


def test_next_round_divides_what_is_needed_by_the_kept_share() -> None:
    assert next_round(60, 27, 65, 1000) == 89  # ceil(33 x 65 / 27 x 1.1) + 1 = ceil(87.39) + 1
    assert next_round(60, 0, 10, 1000) == 60  # nothing kept yet: at least double, at least what is needed
    assert next_round(5, 0, 10, 1000) == 20
    assert next_round(60, 27, 65, 40) == 40  # never past what is left
    assert next_round(10, 9, 20, 50) == 4  # ceil(1 x 20 / 9 x 1.1) + 1 = ceil(2.44) + 1
