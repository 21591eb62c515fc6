"""Synthetic question/answer datasets (``ragrade qa generate``); :func:`~ragrade.api.answer_qa` answers them."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragrade.api._common import PathLike
from ragrade.errors import ConfigError, DataError

if TYPE_CHECKING:
    from ragrade.api.types import GeneratedQA
    from ragrade.corpus.types import Chunk
    from ragrade.llm.base import LLM
    from ragrade.llm.options import LLMOptions
    from ragrade.progress import ProgressFn
    from ragrade.qa.generate import QAGenConfig


def generate_qa(
    source: PathLike,
    out: PathLike,
    *,
    llm: str = "offline",
    config: QAGenConfig | None = None,
    qrels: PathLike | None = None,
    llm_options: LLMOptions | Mapping[str, Any] | None = None,
    max_failed: float | None = None,
    check: bool = True,
    progress: ProgressFn | None = None,
    **settings: Any,
) -> GeneratedQA:
    """Generate synthetic (question, reference answer, context) triplets from chunks (``ragrade qa generate``).

    ``source``: a chunks JSONL or an index folder. ``llm``: ``offline`` (the extractive baseline, no LLM) or
    PROVIDER/MODEL, built with ``llm_options``. ``settings`` are :class:`~ragrade.qa.generate.QAGenConfig`
    fields (``n``, ``seed``, ``min_chunk_chars``, ``oversample``, ``max_tokens``, ``prompt_file``) over
    ``config``. Writes the QA file ``out`` (and the qrels view ``qrels`` when given); returns the triplets
    with the funnel. DataError when no usable triplet came out. Raises (exit-code errors) when more
    requests failed than ``max_failed`` allows, after the files are written (``check=False``: returns the
    triplets anyway; ``result.check()`` raises then).
    """
    import dataclasses

    from ragrade.api.types import QA_RESUME, GeneratedQA
    from ragrade.llm.failures import FailureTally
    from ragrade.qa.files import write_qa, write_qrels
    from ragrade.qa.generate import QAGenConfig, load_generation_prompt
    from ragrade.qa.generate import generate_qa as _generate

    cfg = dataclasses.replace(config or QAGenConfig(), **settings)
    load_generation_prompt(cfg.prompt_file)  # as `exam generate`'s prompt: checked whichever generator runs
    chunks = _load_chunks(Path(source))
    model = _generator(llm, llm_options)
    items, funnel = _generate(chunks, model, cfg, progress=progress)
    tally = FailureTally()
    tally.add_backend(model)
    for i in range(funnel.sampled):
        tally.add("qa generation", None, (funnel.first_error or "failed") if i < funnel.failed else None)
    if not items and funnel.failed:
        tally.check(QA_RESUME, 0.0)
    gen = "offline-extractive (baseline)" if model is None else llm
    if not items:
        counts = ", ".join(f"{k}={v}" for k, v in funnel.to_dict().items() if k != "rejected")
        raise DataError(f"{gen} wrote no usable triplet from {len(chunks)} chunks ({counts}); nothing written to {out}")
    from ragrade.exam.corpus import CORPUS_KEY, corpus_fingerprint

    meta = {"source": str(source), "generator": gen, "seed": cfg.seed, "funnel": funnel.to_dict()}
    meta[CORPUS_KEY] = corpus_fingerprint(chunks)  # what `qa answer` checks its index against
    write_qa(out, items, meta=meta)
    if qrels is not None:
        write_qrels(qrels, items)
    result = GeneratedQA(
        items, out=Path(out), qrels=Path(qrels) if qrels is not None else None, generator=gen,
        funnel=funnel.to_dict(), shortfall=funnel.shortfall(), failures=tally,
    )  # fmt: skip
    if check:
        result.check(max_failed)
    return result


def _load_chunks(path: Path) -> list[Chunk]:
    """Chunks from a chunks JSONL or an index directory."""
    if path.is_dir():
        from ragrade.retrieval.index import load_index

        return list(load_index(path).chunks)
    if not path.is_file():
        raise ConfigError(f"{path}: no such chunks file or index directory")
    from ragrade.corpus.files import read_chunks

    return read_chunks(path)


def _generator(llm: str, llm_options: LLMOptions | Mapping[str, Any] | None) -> LLM | None:
    """The generator LLM (``None``: the offline extractive generator)."""
    from ragrade.qa.generate import OFFLINE

    if llm == OFFLINE:
        return None
    if llm.startswith("offline/"):
        raise ConfigError(
            f"$llm {llm} answers questions and writes none; use $llm {OFFLINE} (the offline "
            "extractive generator) or a real model"
        )
    from ragrade.config import build_config
    from ragrade.llm import create_llm
    from ragrade.llm.options import LLMOptions

    options = llm_options if isinstance(llm_options, LLMOptions) else None
    if options is None:  # its fields, from a Python caller
        options = build_config(LLMOptions, dict(llm_options or {}), source="llm_options")
    return create_llm(llm, options=options)


__all__ = ["generate_qa"]
