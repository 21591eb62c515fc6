"""Benchmark of the exam sweep: questions x pipelines per second with the offline student on the demo corpus,
and the overhead of the Ray executor against the local one on this machine.

    .venv/bin/python benchmarks/bench_sweep.py                 # ~300 demo documents, 60 questions (~2-3 min)
    .venv/bin/python benchmarks/bench_sweep.py --docs 0 --questions 200 --workdir out/bench-sweep   # full demo

The baseline of each ratio is measured in the same run: the Ray executor is
compared with the local executor on the same grid, exam and index; the LLM
response cache is off so both do the same work.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")

RETRIEVERS = ["closed", "bm25", "dense", "hybrid", "oracle"]


def build_inputs(work: Path, n_docs: int | None, n_questions: int) -> tuple[Path, Path]:
    """Demo documents -> recursive chunks -> index + offline cloze exam (reused when present)."""
    index_dir, exam = work / "recursive-200", work / "exam.jsonl"
    if (index_dir / "manifest.json").is_file() and exam.is_file():
        return index_dir, exam
    from ragrade.corpus.chunk import chunk_documents, create_chunker
    from ragrade.corpus.demo import build_demo_corpus
    from ragrade.exam.config import ExamConfig
    from ragrade.exam.files import write_exam
    from ragrade.exam.generate import generate_exam
    from ragrade.retrieval.index import IndexConfig, build_index

    t0 = time.perf_counter()
    docs = build_demo_corpus(n_docs)
    chunks = chunk_documents(docs, create_chunker("recursive", size=200, overlap=20))
    build_index(chunks, index_dir, IndexConfig())
    questions, _ = generate_exam(chunks, None, ExamConfig(n=n_questions, topic_field="topic"))
    write_exam(exam, questions)
    print(
        f"inputs: {len(docs)} documents, {len(chunks)} chunks, {len(questions)} questions "
        f"({time.perf_counter() - t0:.1f}s)"
    )
    return index_dir, exam


def timed_sweep(exam: Path, index_dir: Path, out: Path, executor: str, workers: int) -> tuple[float, int, object]:
    """Wall seconds, rows and summary of one sweep."""
    from ragrade.run.spec import build_sweep_config
    from ragrade.run.sweep import run_sweep

    cfg = build_sweep_config(
        {
            "grid": {"llm": ["offline/student"], "retriever": RETRIEVERS, "k": [3]},
            "indexes": {"recursive-200": str(index_dir)},
            "llm_options": {"cache": False},
            "executor": executor,
            "ray_workers": workers,
            "shard_size": 16,
        }
    )
    t0 = time.perf_counter()
    res = run_sweep(exam, cfg, out, overwrite=True)
    return time.perf_counter() - t0, len(res.responses), res.summary


def main() -> None:
    """Run the benchmark and print throughput and ratios."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", type=int, default=300, help="demo documents (0 = all)")
    ap.add_argument("--questions", type=int, default=60)
    ap.add_argument("--workers", type=int, default=2, help="Ray actors")
    ap.add_argument("--workdir", type=Path, default=None, help="keep inputs here (reused on the next run)")
    ap.add_argument("--no-ray", action="store_true")
    args = ap.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="bench-sweep-"))
    index_dir, exam = build_inputs(work, args.docs or None, args.questions)

    cold, rows, summary = timed_sweep(exam, index_dir, work / "run-local-cold", "local", args.workers)
    warm, rows, summary = timed_sweep(exam, index_dir, work / "run-local", "local", args.workers)
    print(summary[["pipeline", "n", "accuracy", "ci_low", "ci_high"]].to_string(index=False))  # type: ignore[index]
    print(
        f"local executor: {rows} answers; cold {cold:.1f}s ({rows / cold:.1f} q x p/s, models loading), "
        f"warm {warm:.1f}s ({rows / warm:.1f} q x p/s)"
    )
    if args.no_ray:
        return
    ray_s, ray_rows, _ = timed_sweep(exam, index_dir, work / "run-ray", "ray", args.workers)
    import ray

    ray.shutdown()
    print(
        f"ray executor ({args.workers} local actors, incl. start-up and model loads): {ray_s:.1f}s "
        f"({ray_rows / ray_s:.1f} q x p/s)"
    )
    print(f"ratio ray / local-cold = {ray_s / cold:.2f}x, ray / local-warm = {ray_s / warm:.2f}x")


if __name__ == "__main__":
    main()
