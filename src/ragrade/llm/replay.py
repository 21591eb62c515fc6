"""The replay backend (provider ``replay``): answers from a finished run instead of a model.

``replay/<LLM>`` answers each (pipeline, question) exactly as pipeline
``llm=<LLM>|...`` answered it in a finished run's ``responses.parquet`` (option
``replay_from``: the run directory or the Parquet file, e.g. in a sweep.toml
``[llm_options]`` table). A question that pipeline's request failed on fails
again (missing data); an unparseable reply is replayed as an unparseable reply;
a pair the run does not hold is an error naming it. So a grid of ``replay/...``
pipelines reproduces the finished grid's answers, which is how adaptive runs are
validated against a full grid whose answers are known (the request's
``meta`` must carry ``pipeline`` and ``question_id``, as the exam worker's do).
It answers by generating the chosen letter; it offers no log-likelihoods. The exam worker retrieves
nothing for a replay pipeline (the replayed answers already reflect the original retrieval).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

from ragrade.errors import ConfigError
from ragrade.io import JSONObject
from ragrade.llm.base import Completion, GenerationRequest, LoglikelihoodRequest, LoglikelihoodResult

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
NO_LETTER = "(the replayed reply named no option)"
_tables: dict[str, dict[tuple[str, str], tuple[int, str | None]]] = {}
_lock = threading.Lock()


def _load(source: str) -> dict[tuple[str, str], tuple[int, str | None]]:
    """(pipeline, question_id) -> (chosen, error) of a finished run, loaded once per process."""
    key = str(Path(source).resolve())
    with _lock:
        if key not in _tables:
            from ragrade.schemas import read_responses

            df = read_responses(source)
            err = df["error"] if "error" in df else [None] * len(df)
            _tables[key] = {
                (str(p), str(q)): (int(c) if c == c else -1, None if e is None or e != e else str(e))
                for p, q, c, e in zip(df["pipeline"], df["question_id"], df["chosen"], err, strict=True)
            }
        return _tables[key]


class ReplayLLM:
    """Answers from a finished run's responses (see the module docstring)."""

    supports_loglikelihood = False
    is_baseline = False

    def __init__(self, model: str, replay_from: str | Path | None = None) -> None:
        if not replay_from:
            raise ConfigError(
                f"replay/{model} needs the finished run to replay: set llm_options replay_from = 'RUN_DIR'"
            )
        self.name = f"replay/{model}"
        self.model = model
        self.source = str(replay_from)
        self.table = _load(self.source)

    def _original(self, pipeline: str) -> str:
        from ragrade.llm.gguf import llm_label  # ids name a model given by path by its file name

        parts = pipeline.split("|")
        mine, original = f"llm={llm_label(self.name)}", f"llm={llm_label(self.model)}"
        return "|".join(original if p == mine else p for p in parts)

    def _one(self, req: GenerationRequest) -> Completion:
        pid, qid = str(req.meta.get("pipeline", "")), str(req.meta.get("question_id", ""))
        hit = self.table.get((self._original(pid), qid))
        if hit is None:
            return Completion(None, error=f"replay: ({self._original(pid)}, {qid}) is not in {self.source}")
        chosen, error = hit
        if error is not None:
            return Completion(None, error=f"replay: {error}")
        return Completion(LETTERS[chosen] if 0 <= chosen < len(LETTERS) else NO_LETTER)

    async def agenerate(self, requests: Sequence[GenerationRequest]) -> list[Completion]:
        """Replay every request's recorded answer."""
        return [self._one(r) for r in requests]

    async def aloglikelihood(self, requests: Sequence[LoglikelihoodRequest]) -> list[LoglikelihoodResult]:
        """Not offered: every result is an error (pipelines use generation)."""
        return [LoglikelihoodResult(None, error="replay offers no log-likelihoods") for _ in requests]

    def describe(self) -> JSONObject:
        """Arguments for the run manifest."""
        return {"kind": "replay", "model": self.model, "replay_from": str(Path(self.source).resolve())}


__all__ = ["ReplayLLM"]
