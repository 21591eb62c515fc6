"""The JSON records that cross the seams of a grid run: the worker context, pipeline specs, rows, samples.

A grid run hands its workers (in this process or on Ray actors) JSON only: a
:class:`WorkerContext` (files and settings, built by
:func:`ragrade.run.setup.pipeline_context`), one :data:`SpecRecord` per pipeline
(a :class:`~ragrade.run.spec.PipelineSpec` dumped to JSON) and item ids; a
worker returns one :data:`Row` per item (the journal stores it as JSON) and may
attach a :data:`Sample` to it (what was sent and received, for samples.jsonl).
"""

from __future__ import annotations

from typing import TypeAlias, TypedDict


class WorkerContext(TypedDict, total=False):
    """What every worker of a grid run receives (JSON; each key optional to the code that reads it)."""

    indexes: dict[str, str]  # chunker label -> absolute index dir
    external: dict[str, str]  # external system name -> "module:function" or URL
    prompts: dict[str, str]  # prompt name -> absolute template file
    llm_options: dict[str, object]  # LLMOptions.worker_dict(): what differs from the defaults
    retriever_options: dict[str, object]  # keyword arguments of Index.retriever
    transform_llm: str  # the LLM of query transforms and LLM post-processors
    transform_options: dict[str, dict[str, object]]  # transform name -> its options
    seed: int
    icl_pool: list[str]  # question ids held out as few-shot examples
    passage_headings: bool  # show each passage's heading path first
    shared_retrieval: str  # the file of retrieval precomputed by the driver (run/shared.py)
    samples: bool  # attach what was sent and received to each row
    exam: str  # the exam worker: the exam file
    answer: dict[str, object]  # the exam worker: AnswerConfig as JSON
    qa: str  # the free-text QA worker: the QA file
    generation: dict[str, float]  # the free-text QA worker: max_tokens and temperature


SpecRecord: TypeAlias = dict[str, object]
"""A pipeline's spec as JSON (``PipelineSpec.model_dump(mode="json")``, maybe with ``_``-prefixed journal keys)."""

Row: TypeAlias = dict[str, object]
"""One result row (one pipeline x one item), as journaled and written to the responses file."""

Sample: TypeAlias = dict[str, object]
"""One samples.jsonl line: the pipeline, the item, the request sent and the reply received."""

__all__ = ["Row", "Sample", "SpecRecord", "WorkerContext"]
