"""The job's ``[corpus]`` is ``ragrade corpus``'s own settings, and ``ragrade run`` says what the loader left out."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from ragrade.errors import ConfigError
from ragrade.job.config import CorpusSection, JobConfig
from ragrade.job.layout import RunLayout
from ragrade.job.progress import Display
from ragrade.job.stages import StageContext, run_corpus

TERN = Path(__file__).resolve().parents[1] / "data" / "docsites" / "tern"


def test_the_section_takes_every_loader_setting_and_unknown_keys_are_refused() -> None:
    sec = CorpusSection.model_validate({"paths": ["docs"], "templates": True, "min_chars": 20, "dedupe": False})
    cc = sec.corpus_config()
    assert (cc.templates, cc.min_chars, cc.dedupe) == (True, 20, False)
    assert "paths" not in cc.model_dump()
    with pytest.raises(ValueError, match="nope"):
        CorpusSection.model_validate({"nope": 1})


def test_the_stage_key_of_an_unchanged_section_is_the_one_earlier_folders_have() -> None:
    old: dict[str, object] = {"demo": True, "demo_limit": None, "demo_topics": None, "paths": []}
    old.update(text_field=None, id_field=None, drop_patterns=[])
    assert CorpusSection(demo=True).stage_key() == old
    assert CorpusSection(demo=True, templates=True).stage_key() == {**old, "templates": True}


def test_run_prints_what_the_loader_left_out(tmp_path: Path) -> None:
    cfg = JobConfig.model_validate({"corpus": {"paths": [str(TERN)]}})
    ctx = StageContext(cfg, RunLayout(tmp_path), lambda *_a: None)
    summary = run_corpus(ctx)
    documents = summary["documents"]
    assert isinstance(documents, int) and documents > 0
    note = summary.get("note")
    assert isinstance(note, str) and note.startswith("left out ")
    shown = io.StringIO()
    Display(stream=shown, interval=0).stage_done(0, 9, "corpus", 1.0, summary)
    lines = shown.getvalue().splitlines()
    assert lines[1] == f"ragrade: corpus: {note}" and "note=" not in lines[0]
    # the stage's summary is JSON as stages.json keeps it
    assert json.loads(json.dumps(summary))["note"] == note


def test_a_bad_loader_setting_is_a_config_error() -> None:
    from ragrade.job.config import load_job_config

    with pytest.raises((ConfigError, ValueError)):
        load_job_config(None, overrides={"corpus": {"min_chars": 0}})
