"""Inputs of exam generation: chunks from a chunks file or an index folder, and the generator spec."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ragrade.corpus.types import CHUNKS_KIND, Chunk
from ragrade.errors import ConfigError, DataError
from ragrade.llm.base import LLM

if TYPE_CHECKING:
    from ragrade.llm.options import LLMOptions

OFFLINE_SPECS = ("offline", "offline/cloze")


def load_chunks(path: str | Path) -> list[Chunk]:
    """Chunks from a chunks JSONL file or from an index folder; DataError when neither or empty."""
    p = Path(path)
    if p.is_dir():
        try:
            from ragrade.retrieval.index import load_index
        except ImportError as exc:  # pragma: no cover - retrieval is part of the package
            raise DataError(f"{p}: reading an index folder needs ragrade.retrieval.index ({exc})") from exc
        chunks = list(load_index(p).chunks)
    elif p.is_file():
        chunks = _read_chunk_file(p)
    else:
        raise DataError(f"{p}: no such chunks file or index folder")
    if not chunks:
        raise DataError(f"{p}: no chunks")
    return chunks


def _read_chunk_file(p: Path) -> list[Chunk]:
    try:
        from ragrade.corpus.files import read_chunks
    except ImportError:  # the corpus stage's reader is not there: read the JSONL directly
        from ragrade.io import read_jsonl

        header, records = read_jsonl(p)
        if header is not None and header.kind != CHUNKS_KIND:
            raise DataError(f"{p}: expected a '{CHUNKS_KIND}' file, found a '{header.kind}' file") from None
        try:
            return [Chunk.from_record(r) for r in records]
        except (KeyError, TypeError, ValueError) as exc:
            raise DataError(f"{p}: malformed chunk record ({exc!r})") from exc
    try:
        return read_chunks(p)
    except DataError as exc:
        if "found a 'documents' file" in str(exc):
            chunk = "`ragrade chunk {} --out chunks.jsonl`".format(p)  # noqa: UP032 (a command line to copy)
            index = "`ragrade index {} --out INDEX`".format(p)  # noqa: UP032
            raise DataError(
                f"{p} holds documents, not chunks: chunk them first ({chunk}) or build an index ({index}) and give that"
            ) from exc
        raise


def is_offline(spec: str) -> bool:
    """True when ``spec`` selects the offline cloze generator."""
    return spec.strip().lower() in OFFLINE_SPECS


def resolve_generator_llm(spec: str, options: LLMOptions | None = None) -> LLM | None:
    """``None`` for the offline generator, else the LLM built by ``ragrade.llm.create_llm`` with ``options``."""
    if is_offline(spec):
        return None
    if spec.strip().lower().startswith("offline/"):
        raise ConfigError(
            f"'{spec}' cannot write questions; use 'offline' (offline/cloze) or a real model such as openai/<model>"
        )
    from ragrade.llm import create_llm

    llm: LLM = create_llm(spec, options)
    return llm


__all__ = ["OFFLINE_SPECS", "is_offline", "load_chunks", "resolve_generator_llm"]
