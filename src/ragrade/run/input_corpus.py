"""Does the grid's index hold the documents its exam (or QA file) was written from?

Called by every grid run before its folder is written (:func:`ragrade.run.grid.prepare_grid`):
:func:`check_input_corpus` compares the source passages of the input's questions with each index a pipeline
of the grid searches (:func:`ragrade.exam.corpus.held_share`) and records what it found in the manifest's
``input_corpus`` entry:

* every source passage held: nothing more is said;
* some missing: one line, kept under ``warning`` and shown with the run's results (e.g. ``exam exam.jsonl
  was written from corpus 3f2a9c1e… (1,204 chunks); index idx holds 12% of its 300 source passages:
  retrieval scores are not about this exam's documents``); an input written before ragrade recorded a
  fingerprint is checked by its ids all the same;
* an oracle in the grid (a retriever handed the gold passage) while an index lacks some gold passages is
  refused (ConfigError, exit 2, nothing written): its accuracy would bound passages no retriever of the grid
  can find.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragrade.errors import ConfigError
from ragrade.exam.corpus import Share, corpus_fingerprint, held_share, recorded_fingerprint
from ragrade.io import HEADER_KEY

if TYPE_CHECKING:
    from ragrade.run.pipeline import Resources
    from ragrade.run.spec import PipelineSpec

INPUT_CORPUS_KEY = "input_corpus"  # the manifest entry


def check_input_corpus(res: Resources, specs: Sequence[PipelineSpec], manifest: dict[str, Any]) -> None:
    """Check the input's source passages against every index the grid searches (see the module docstring):
    record the finding in ``manifest``; ConfigError when an oracle would hand passages an index lacks."""
    from ragrade.retrieval.base import retriever_caps

    labels = sorted({s.chunker for s in specs if s.needs_index})
    if not labels:  # no pipeline searches an index: nothing to compare
        return
    kind, path = _input(res)
    recorded = recorded_fingerprint(_header_meta(path)) if path else None
    questions = list(res.questions.values())
    name = Path(path).name if path else kind
    entry: dict[str, Any] = {"input": kind, "fingerprint": recorded, "indexes": {}}
    lines: list[str] = []
    short: list[tuple[str, Share]] = []
    for label in labels:
        chunks = res.index(label).chunks
        share = held_share(questions, chunks)
        digest = str(corpus_fingerprint(chunks)["digest"])
        entry["indexes"][label] = {"digest": digest, "held": share.held, "of": share.of}
        if not share.complete:
            short.append((label, share))
            lines.append(_line(kind, name, recorded, label, share))
    oracles = sorted({s.retriever for s in specs if retriever_caps(s.retriever).needs_gold})
    if oracles and short:
        label, share = max(short, key=lambda ls: ls[1].missing_questions)
        raise ConfigError(
            f"the {', '.join(oracles)} retriever would hand {share.missing_questions} of {len(questions)} "
            f"questions a gold passage that index {label} does not hold ({lines[0]}); take the {kind} against "
            "the index it was written from, or leave the oracle out of $retrievers"
        )
    if lines:
        entry["warning"] = "; ".join(lines)
    manifest[INPUT_CORPUS_KEY] = entry


def recorded_warnings(manifest: dict[str, Any] | None) -> list[str]:
    """The warning :func:`check_input_corpus` recorded in a run's ``manifest`` (none: an empty list)."""
    entry = (manifest or {}).get(INPUT_CORPUS_KEY)
    warning = entry.get("warning") if isinstance(entry, dict) else None
    return [warning] if isinstance(warning, str) and warning else []


def _input(res: Resources) -> tuple[str, str | None]:
    """``(what the input is called, its path)``: an exam, or a QA file."""
    if "exam" in res.context:
        return "exam", str(res.context["exam"])
    if "qa" in res.context:
        return "QA file", str(res.context["qa"])
    return "exam", None


def _header_meta(path: str) -> dict[str, Any] | None:
    """The header's metadata of a ragrade JSONL file (its first line), None without one."""
    try:
        with open(path, encoding="utf-8") as fh:
            head = json.loads(fh.readline() or "{}")
    except (OSError, ValueError):
        return None
    meta = head.get(HEADER_KEY) if isinstance(head, dict) else None
    return meta if isinstance(meta, dict) else None


def _line(kind: str, name: str, recorded: dict[str, object] | None, label: str, share: Share) -> str:
    if recorded is not None:
        chunks = recorded.get("chunks")
        counted = f" ({chunks:,} chunks)" if isinstance(chunks, int) else ""
        written = f"was written from corpus {str(recorded['digest'])[:8]}…{counted}"
    else:
        written = "records no corpus fingerprint (written before ragrade recorded one)"
    return (
        f"{kind} {name} {written}; index {label} holds {share.percent()} of its {share.of:,} source passages: "
        f"retrieval scores are not about this {kind}'s documents"
    )


__all__ = ["INPUT_CORPUS_KEY", "check_input_corpus", "recorded_warnings"]
