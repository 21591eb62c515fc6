"""The resume rules every grid runner shares (run/setup.py), checked through each runner's Python API.

A runner is given as ``run(out, cfg) -> rows added`` for a :class:`~ragrade.run.spec.SweepConfig`.
:func:`check_resume_rules` runs it against the fake OpenAI server: a rerun that changes only the
concurrency, the timeout or the retries resumes (no request sent, no row added); one that changes an
LLM option that changes answers, the prompt file or the questions asked is refused with a journal
mismatch, and nothing is sent.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from tests.support.openai_server import OpenAIServer

from ragrade.run.spec import SweepConfig, build_sweep_config
from ragrade.run.store import JournalMismatch

RunFn = Callable[[Path, SweepConfig], int]


def check_resume_rules(run: RunFn, tmp_path: Path, prompt_text: str, responder: Callable[..., str]) -> None:
    """Run, resume after throughput-only changes, then check that each change of what answers depend on is refused."""
    first, second = tmp_path / "prompt.txt", tmp_path / "other_prompt.txt"
    first.write_text(prompt_text, encoding="utf-8")
    second.write_text("Please. " + prompt_text, encoding="utf-8")
    out = tmp_path / "run"
    with OpenAIServer(responder=responder) as srv:
        base_opts = {"base_url": srv.base_url, "concurrency": 2, "timeout": 30.0, "max_retries": 0}

        def settings(prompt: Path = first, limit: int = 6, **opts: object) -> SweepConfig:
            return build_sweep_config(
                {
                    "grid": {"llms": ["openai/test-model"], "retrievers": ["closed", "oracle"], "prompts": ["mine"]},
                    "prompts": {"mine": str(prompt)},
                    "limit": limit,
                    "llm_options": {**base_opts, **opts},
                }
            )

        added = run(out, settings())
        sent = srv.requests_total
        assert added > 0 and sent > 0
        for change in ({"concurrency": 3}, {"timeout": 12.5}, {"max_retries": 2}):
            assert run(out, settings(**change)) == 0, change  # resumed: nothing recomputed
        assert srv.requests_total == sent  # and nothing sent again
        refused = [
            settings(seed=7),  # an option of the model that changes its answers
            settings(prompt=second),  # another prompt file
            settings(limit=5),  # other questions
        ]
        for other in refused:
            with pytest.raises(JournalMismatch, match="start over with overwrite"):
                run(out, other)
        assert srv.requests_total == sent
