"""Question writers: one raw candidate question per chunk, from an LLM or from the offline cloze generator."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ragrade.corpus.types import Chunk
from ragrade.exam.config import ExamConfig
from ragrade.exam.offline import STEM_RULES, ClozeGenerator, subject_of
from ragrade.exam.parse import ParsedQuestion, check_question_text, parse_question, validate
from ragrade.exam.prompts import QUESTION_SCHEMA, SYSTEM_PROMPT, USER_PROMPT, load_template, render
from ragrade.exam.text import derived_seed, stable_hash
from ragrade.io import JSONObject
from ragrade.llm.base import LLM, GenerationRequest, Message, generate
from ragrade.progress import counting_requests, note_failed
from ragrade.registry import register

#: reasons a chunk yields no candidate at all (stage "generation"): ``llm_error`` is a failed request (missing,
#: asked again by a rerun), ``refused`` a reply declining the task (an answer, not a parse failure); offline, a
#: stem rule (:data:`~ragrade.exam.offline.STEM_RULES`) when it set aside every usable blank of the chunk
GENERATION_REASONS = ("llm_error", "refused", "no_key_term", "no_distractors", *STEM_RULES)

_REFUSAL = re.compile(
    r"^\W*(?:i'?m sorry|i am sorry|sorry,|i apologi[sz]e|i can(?:no|'|’)t|i am unable|i'?m unable|"
    r"i am not able|i'?m not able|i will not|i won'?t|as an ai)\b",
    re.IGNORECASE,
)


def is_refusal(text: str | None) -> bool:
    """True when a reply opens by declining the task ("I'm sorry, I can't ...")."""
    return bool(text and _REFUSAL.match(text.strip()))


Progress = Callable[[int, int], None]  # (chunks done, valid candidates so far)


@dataclass
class Raw:
    """One chunk's outcome: a parsed candidate or a failure (stage, reason, detail), never both."""

    chunk: Chunk
    parsed: ParsedQuestion | None = None
    stage: str | None = None
    reason: str | None = None
    detail: str = ""
    text: str | None = None  # the raw model output, when there is one
    generator: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True when this chunk produced a valid candidate."""
        return self.parsed is not None


class QuestionWriter(Protocol):
    """Writes one candidate question per chunk."""

    name: str

    def write(self, chunks: Sequence[Chunk], progress: Progress | None = None) -> list[Raw]:
        """One :class:`Raw` per chunk, in order."""
        ...

    def describe(self) -> JSONObject:
        """Generator name and parameters for the exam header."""
        ...


class LLMWriter:
    """Asks an LLM for a question per chunk and parses the reply (JSON first, then the text layout)."""

    def __init__(self, llm: LLM, cfg: ExamConfig) -> None:
        self.llm = llm
        self.cfg = cfg
        self.name = llm.name
        self.user_template = load_template(cfg.prompt_file, USER_PROMPT, require_document=True)
        self.system_template = load_template(cfg.system_prompt_file, SYSTEM_PROMPT, require_document=False)
        self.prompt_id = stable_hash(self.system_template, self.user_template)
        self.templates = f"{self.system_template}\n{self.user_template}"  # whose placeholders a reply must not echo

    def request(self, chunk: Chunk) -> GenerationRequest:
        """The generation request for ``chunk``."""
        domain = self.cfg.domain or str(chunk.metadata.get(self.cfg.topic_field or "topic") or "technical")
        title = subject_of(chunk, self.cfg.topic_field) or chunk.source or "the corpus"
        document = chunk.display_text()  # a part of a split code block with its fences
        system = render(self.system_template, document=document, domain=domain, title=title)
        user = render(self.user_template, document=document, domain=domain, title=title)
        return GenerationRequest(
            messages=(Message("system", system), Message("user", user)),
            temperature=self.cfg.temperature,
            max_tokens=self.cfg.max_tokens,
            seed=derived_seed(self.cfg.seed, "generate", chunk.id),
            json_schema=QUESTION_SCHEMA if self.cfg.json_output else None,
            passages=(document,),
            task="generate_question",
            meta={"chunk_id": chunk.id},
        )

    def write(self, chunks: Sequence[Chunk], progress: Progress | None = None) -> list[Raw]:
        """Generate in batches (the LLM layer handles concurrency, cache and retries) and parse.

        ``progress(chunks done, valid so far)`` after each batch and, while a batch runs, as each of its
        requests is answered (the batch's chunks then count as done as their replies arrive).
        """
        out: list[Raw] = []
        valid = 0
        step = self.cfg.batch_size
        for b in range(0, len(chunks), step):
            batch = chunks[b : b + step]
            with counting_requests(_live(progress, len(out), valid), cap=len(batch)):
                completions = generate(self.llm, [self.request(c) for c in batch])
            if len(completions) != len(batch):
                raise RuntimeError(f"{self.llm.name} returned {len(completions)} results for {len(batch)} requests")
            for chunk, comp in zip(batch, completions, strict=True):
                gen = {
                    "name": "llm",
                    "llm": self.llm.name,
                    "prompt": self.prompt_id,
                    "temperature": self.cfg.temperature,
                    "cached": comp.cached,
                    # how JSON was asked of the server for this reply ("json_schema", "json_object", "text"), or None
                    "response_format": comp.response_format,
                }
                if not comp.ok:
                    out.append(
                        Raw(chunk, stage="generation", reason="llm_error", detail=str(comp.error)[:300], generator=gen)
                    )
                    continue
                res = parse_question(
                    comp.text, self.cfg.min_question_chars, finish_reason=comp.finish_reason, template=self.templates
                )
                if not isinstance(res, ParsedQuestion) and is_refusal(comp.text):
                    detail = str(comp.text).strip()[:300]
                    out.append(
                        Raw(chunk, stage="generation", reason="refused", detail=detail, text=comp.text, generator=gen)
                    )
                    continue
                if isinstance(res, ParsedQuestion):
                    valid += 1
                    out.append(Raw(chunk, parsed=res, text=comp.text, generator={**gen, "format": res.format}))
                else:
                    out.append(
                        Raw(chunk, stage="parse", reason=res.reason, detail=res.detail, text=comp.text, generator=gen)
                    )
            note_failed(sum(1 for comp in completions if not comp.ok))  # failed requests, for the progress display
            if progress is not None:
                progress(len(out), valid)
        return out

    def describe(self) -> JSONObject:
        """The LLM, prompt fingerprint and sampling parameters."""
        return {
            "name": "llm",
            "llm": self.llm.describe(),
            "prompt": self.prompt_id,
            "prompt_file": self.cfg.prompt_file,
            "temperature": self.cfg.temperature,
            "max_tokens": self.cfg.max_tokens,
            "json_output": self.cfg.json_output,
        }


def _live(progress: Progress | None, done: int, valid: int) -> Callable[[int], None] | None:
    """The report of a running batch: ``done`` chunks before it plus its requests answered so far."""
    if progress is None:
        return None
    return lambda answered: progress(done + answered, valid)


class ClozeWriter:
    """Adapter of :class:`~ragrade.exam.offline.ClozeGenerator` to the writer interface."""

    name = "offline/cloze"

    def __init__(self, generator: ClozeGenerator, cfg: ExamConfig) -> None:
        self.generator = generator
        self.cfg = cfg
        generator.set_stem(cfg.stem_window, cfg.stem_subject)

    def write(self, chunks: Sequence[Chunk], progress: Progress | None = None) -> list[Raw]:
        """One cloze candidate (or a failure reason) per chunk, generated in batches."""
        out: list[Raw] = []
        valid = 0
        step = max(self.cfg.batch_size, 64)
        for b in range(0, len(chunks), step):
            batch = chunks[b : b + step]
            for chunk, raw in zip(batch, self.generator.generate_many(batch), strict=True):
                if "failure" in raw:
                    why, detail = raw["failure"], raw.get("detail", "")
                    out.append(Raw(chunk, stage="generation", reason=why, detail=detail, generator={"name": self.name}))
                    continue
                res = validate(raw["question"], list(raw["choices"]), raw["answer"], "cloze")
                if isinstance(res, ParsedQuestion):
                    res = check_question_text(raw["question"], self.cfg.min_question_chars) or res
                if isinstance(res, ParsedQuestion):
                    valid += 1
                    out.append(Raw(chunk, parsed=res, generator=raw["generator"]))
                else:
                    out.append(
                        Raw(chunk, stage="parse", reason=res.reason, detail=res.detail, generator=raw["generator"])
                    )
            if progress is not None:
                progress(len(out), valid)
        return out

    def describe(self) -> JSONObject:
        """Generator name, seed and embedder."""
        return {
            "name": self.name,
            "seed": self.generator.seed,
            "embedder": self.generator.embedder.describe(),
            "pool_chunks": len(self.generator.chunks),
        }


@register("exam_generator", "llm")
def _llm_writer(llm: LLM, cfg: ExamConfig) -> LLMWriter:
    return LLMWriter(llm, cfg)


@register("exam_generator", "offline/cloze")
def _cloze_writer(generator: ClozeGenerator, cfg: ExamConfig) -> ClozeWriter:
    return ClozeWriter(generator, cfg)


__all__ = ["GENERATION_REASONS", "ClozeWriter", "LLMWriter", "QuestionWriter", "Raw"]
