"""A newcomer extends ragrade with one new file and one registry line (issue 26).

Each plugin below is one module written into a fresh folder, named in ``$RAGRADE_PLUGINS`` and run from that
folder through the real CLI in a child process: a retriever, an LLM backend, a query transform and a passage
post-processor. Nothing else in ragrade is edited or told about them. The fourth kind of the issue, a testbed,
is proved the same way (a toy testbed defined in the test suite, run end to end) by
tests/robust/test_testbed_registry.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest

from ragrade.exam.files import Question, write_exam
from ragrade.run.manifest import read_manifest
from ragrade.run.summary import read_responses

PLUGINS: dict[str, str] = {
    "longword_retriever": '''
"""A retriever: the chunks that contain the query's longest word, in index order."""
import re
from collections.abc import Sequence
from typing import Any

from ragrade.registry import register
from ragrade.retrieval.base import Hit


class LongestWord:
    name = "longword"

    def __init__(self, index: Any) -> None:
        self.index = index

    def retrieve(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        out = []
        for q in queries:
            word = max(re.findall(r"[A-Za-z]+", q), key=len).lower()
            found = [c for c in self.index.chunks if word in c.text.lower()][:k]
            out.append([Hit(c.id, c.doc_id, 1.0, rank, c.text) for rank, c in enumerate(found, start=1)])
        return out

    def describe(self) -> dict[str, object]:
        return {"retriever": self.name, "rule": "longest query word"}


@register("retriever", "longword")
def make(index: Any, **options: object) -> LongestWord:
    return LongestWord(index)
''',
    "steady_llm": '''
"""An LLM backend that always answers the first option."""
from collections.abc import Sequence

from ragrade.llm.base import Completion, GenerationRequest, LoglikelihoodRequest, LoglikelihoodResult
from ragrade.registry import register


class Steady:
    supports_loglikelihood = False
    is_baseline = True

    def __init__(self, model: str) -> None:
        self.name = f"steady/{model}"

    async def agenerate(self, requests: Sequence[GenerationRequest]) -> list[Completion]:
        return [Completion(text="A") for _ in requests]

    async def aloglikelihood(self, requests: Sequence[LoglikelihoodRequest]) -> list[LoglikelihoodResult]:
        return [LoglikelihoodResult(logprobs=None, error="steady scores nothing") for _ in requests]

    def describe(self) -> dict[str, object]:
        return {"backend": "steady", "model": self.name}


@register("llm", "steady")
def make(model: str, **options: object) -> Steady:
    return Steady(model)
''',
    "pin_query": '''
"""A query transform that appends one rare word to every query."""
from collections.abc import Sequence

from ragrade.registry import register
from ragrade.retrieval.transforms import QueryPlan

WORD = "Wolfeschlegelsteinhausen"


class Pin:
    name = "pin"

    async def transform(self, queries: Sequence[str]) -> list[QueryPlan]:
        return [QueryPlan(q, [f"{q} {WORD}"]) for q in queries]

    def describe(self) -> dict[str, object]:
        return {"name": self.name, "word": WORD}


@register("query_transform", "pin")
def make(*, index: object = None, llm: object = None) -> Pin:
    return Pin()
''',
    "pad_post": '''
"""A passage post-processor that appends the index's first chunk to every hit list."""
from collections.abc import Sequence
from typing import Any

from ragrade.registry import register
from ragrade.retrieval.base import Hit


class Pad:
    name = "pad"

    def __init__(self, index: Any) -> None:
        self.index = index

    async def process(
        self, queries: Sequence[str], hits: list[list[Hit]], k: int
    ) -> tuple[list[list[Hit]], list[str | None]]:
        c = self.index.chunks[0]
        return [[*hl, Hit(c.id, c.doc_id, 0.0, len(hl) + 1, c.text)] for hl in hits], [None] * len(hits)

    def describe(self) -> dict[str, object]:
        return {"name": self.name}


@register("post_processor", "pad")
def make(*, index: Any = None, llm: object = None) -> Pad:
    return Pad(index)
''',
}
PLACES = ["Skarvikholm", "Brackenfold", "Tamsettbury", "Drummelside", "Garrowpoint", "Ostreyhaven", "Pellmoorton"]
RARE = "Wolfeschlegelsteinhausen"  # what pin_query appends; only the last chunk contains it


@dataclass(frozen=True)
class Workspace:
    """The plugin folder (the child's working directory), its environment, the exam and the index."""

    root: Path
    env: dict[str, str]

    def ragrade(self, *args: str) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "ragrade", *args]
        return subprocess.run(cmd, cwd=self.root, env=self.env, capture_output=True, text=True, timeout=300)

    def take(self, out: str, *args: str) -> subprocess.CompletedProcess[str]:
        return self.ragrade("exam", "take", "exam.jsonl", "--index", "small=idx", "--k", "2", "--out", out, *args)


def _corpus(root: Path) -> None:
    """One chunk per place (each place name is the longest word of its question); the exam's answers rotate A-D."""
    questions, lines = [], []
    for i, place in enumerate([*PLACES, "Vellorangap"]):
        text = f"The keepers of {place} opened the old mill in {1900 + 11 * i}."
        text += f" {RARE} kept the key." if i == len(PLACES) else ""
        lines.append(json.dumps({"id": f"c{i}", "doc_id": f"d{i}", "text": text, "start": 0, "end": len(text)}))
        years = [str(1900 + 11 * ((i + j) % 8)) for j in range(4)]
        answer = i % 4
        years = years[-answer:] + years[:-answer] if answer else years
        question = f"In which year did the keepers of {place} open the mill?"
        questions.append(Question(f"q{i}", question, years, answer, f"d{i}", f"c{i}", context=text))
    (root / "chunks.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    write_exam(root / "exam.jsonl", questions)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    root = tmp_path_factory.mktemp("plugins")
    for module, source in PLUGINS.items():
        (root / f"{module}.py").write_text(source.lstrip(), encoding="utf-8")
    _corpus(root)
    env = dict(os.environ)
    env.update(RAGRADE_PLUGINS=",".join(PLUGINS), RAGRADE_CACHE_DIR=str(root / "cache"), RAGRADE_PROGRESS="off")
    ws = Workspace(root, env)
    done = ws.ragrade("index", "chunks.jsonl", "--out", "idx", "--no-dense")
    assert done.returncode == 0, done.stderr
    return ws


@pytest.fixture(scope="module")
def responses(workspace: Workspace) -> pd.DataFrame:
    """One `exam take` over the plugins: retriever x LLM x (none, pin) x (none, pad)."""
    args = ("--retrievers", "longword", "--llm", "steady/x", "--query", "none,pin", "--post", "none,pad")
    done = workspace.take("run", *args)
    assert done.returncode == 0, done.stderr
    assert "retriever=longword" in done.stdout and "Traceback" not in done.stderr
    return read_responses(workspace.root / "run")


def _pipeline(df: pd.DataFrame, query: str, post: str) -> pd.DataFrame:
    rows = df[(df["query"] == query) & (df["post"] == post)].sort_values("question_id")
    assert len(rows) == len(PLACES) + 1
    return rows


def test_a_retriever_in_one_file_retrieves_by_its_own_rule(responses: pd.DataFrame, workspace: Workspace) -> None:
    plain = _pipeline(responses, "none", "none")
    assert set(plain["pipeline"]) == {"llm=steady/x|retriever=longword|k=2|icl=0|chunker=small"}
    # the longest word of question i is its place, which only chunk i contains
    assert [list(r) for r in plain["retrieved"]] == [[f"c{i}"] for i in range(len(PLACES) + 1)]
    components = read_manifest(workspace.root / "run")["components"]
    assert components["retriever:small:longword"] == {"retriever": "longword", "rule": "longest query word"}


def test_an_llm_backend_in_one_file_answers_every_question(responses: pd.DataFrame, workspace: Workspace) -> None:
    assert set(responses["llm"]) == {"steady/x"} and set(responses["output"]) == {"A"}
    assert (responses["chosen"] == 0).all() and responses["error"].isna().all()
    assert list(responses["correct"]) == [int(a == 0) for a in responses["answer"]]  # right only when A is
    summary = pd.read_csv(workspace.root / "run" / "summary.csv")
    assert len(summary) == 4 and (summary["n"] == len(PLACES) + 1).all()
    assert read_manifest(workspace.root / "run")["components"]["llm:steady/x"] == {
        "backend": "steady",
        "model": "steady/x",
    }


def test_a_query_transform_in_one_file_rewrites_what_is_searched(responses: pd.DataFrame) -> None:
    pinned = _pipeline(responses, "pin", "none")
    assert all(p.endswith("|query=pin") for p in pinned["pipeline"])
    # the appended word is now every query's longest: every question retrieves the one chunk that contains it
    assert [list(r) for r in pinned["retrieved"]] == [[f"c{len(PLACES)}"]] * (len(PLACES) + 1)
    assert pinned["transform_error"].isna().all()


def test_a_post_processor_in_one_file_rewrites_the_hits(responses: pd.DataFrame) -> None:
    padded = _pipeline(responses, "none", "pad")
    assert all(p.endswith("|post=pad") for p in padded["pipeline"])
    assert [list(r) for r in padded["retrieved"]] == [[f"c{i}", "c0"] for i in range(len(PLACES) + 1)]
    both = _pipeline(responses, "pin", "pad")  # transform, retrieve, process: in that order
    assert [list(r) for r in both["retrieved"]] == [[f"c{len(PLACES)}", "c0"]] * (len(PLACES) + 1)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ("--retrievers", "longwrd"),
            "unknown retriever 'longwrd'; valid choices: bm25, closed, dense, hybrid, longword,",
        ),
        (("--llm", "stedy/x"), "unknown llm 'stedy'; valid choices: hf, llamacpp, offline, openai, replay, steady."),
        (("--query", "pim"), "unknown query_transform 'pim'; valid choices: hyde, multi-query, none, pin, rm3."),
        (
            ("--post", "pda"),
            "unknown post_processor 'pda'; valid choices: compress, llm-compress, llm-rerank, mmr, none, pad,",
        ),
    ],
    ids=["retriever", "llm", "query", "post"],
)
def test_a_misspelt_plugin_name_gets_a_did_you_mean(workspace: Workspace, flags: tuple[str, str], message: str) -> None:
    args = {"--retrievers": "longword", "--llm": "steady/x", flags[0]: flags[1]}
    done = workspace.take(f"bad{flags[0]}", *[x for kv in args.items() for x in kv])
    assert done.returncode == 2
    assert message in done.stderr, done.stderr
    name = {"--retrievers": "longword", "--llm": "steady", "--query": "pin", "--post": "pad"}[flags[0]]
    assert f"Did you mean '{name}'?" in done.stderr and "Traceback" not in done.stderr
    assert not (workspace.root / f"bad{flags[0]}").exists()


def test_the_testbed_case_is_proved_by_its_own_test() -> None:
    source = (Path(__file__).parents[1] / "robust" / "test_testbed_registry.py").read_text(encoding="utf-8")
    assert 'register("testbed", "toy_quote")(QuoteTestbed)  # the one registry line' in source
    assert "def test_registered_toy_testbed_runs_end_to_end_through_the_cli(" in source
