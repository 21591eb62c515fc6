"""ragrade from Python, notebook style: every verb of the CLI as a function, results as DataFrames.

Run it as a script (``python examples/notebook_api.py``) or cell by cell in an editor that
understands ``# %%`` cells (VS Code, PyCharm, Jupytext). Everything runs offline on a small
slice of the built-in demo corpus (the Python standard library's docstrings): the cloze exam
generator, the offline embedding-similarity student, BM25 and dense retrieval. Files go to
``$RAGRADE_EXAMPLE_OUT`` (default: a new temporary folder).
"""

# %% setup
from __future__ import annotations

import os
import tempfile
from pathlib import Path

import ragrade as rg

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
work = Path(os.environ.get("RAGRADE_EXAMPLE_OUT") or tempfile.mkdtemp(prefix="ragrade-api-"))
work.mkdir(parents=True, exist_ok=True)

# %% load and chunk the corpus (files written only where `out=` is given)
docs = rg.load_corpus(demo=True, demo_topics=["json", "csv", "email"], demo_limit=60, out=work / "docs.jsonl")
chunks = rg.chunk(docs, strategy="recursive", size=200, overlap=20, out=work / "chunks.jsonl")
print(f"{len(docs)} documents -> {len(chunks)} chunks")

# %% build an index: BM25 plus dense vectors of the bundled MiniLM embedder (cached on disk)
index = rg.build_index(chunks, work / "index")
print(f"index of {len(index)} chunks at {index.path}")

# %% generate an exam offline (cloze questions, no LLM); written with its funnel sidecars
questions = rg.generate_exam(index, work / "exam.jsonl", n=30, seed=0)
print(questions[0].question, questions[0].choices)

# %% take it: the offline student over three pipelines (closed book, BM25, dense at k=3)
result = rg.take_exam(
    work / "exam.jsonl",
    work / "run",
    indexes={"rec200": index},
    llms="offline/student",
    retrievers=["closed", "bm25", "dense"],
    k=3,
)
print(result.summary[["pipeline", "n", "accuracy", "ci_low", "ci_high"]])

# %% fit IRT (writes run/irt.json and its tables next to the responses)
irt = rg.fit_irt(work / "run", model="2pl")
print(dict(zip(irt.pipelines, irt.theta.round(2), strict=True)))

# %% robustness: testbeds built from the exam and the index, answered by the offline extractive reader
testbeds = rg.build_testbeds(work / "testbeds", index, exam=work / "exam.jsonl", min_positives=1)
noise = rg.run_testbed(
    testbeds["base"], "noise", "offline/extractive", work / "noise", noise_ratios=[0.0, 0.6], docs=3, limit=12
)
print(f"{noise[0].metrics['n']} answers over 2 noise ratios -> {noise[0].out_dir}")

# %% open the run directory (and the testbed kept beside it): every table, as pandas DataFrames
run = rg.open_run(work / "run", extra=[work / "noise"])
print(run.tables())
responses, abilities, items, robust = run.responses, run.irt_abilities, run.irt_items, run.robust

# %% render the self-contained HTML report
report = rg.render_report(work / "run", extra=[work / "noise"])
print(f"report: {report}")
