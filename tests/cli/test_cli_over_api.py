"""The command line is a thin layer over the Python API: a verb parses its flags, calls ``ragrade.api``, prints."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from ragrade import api
from ragrade.cli.main import main


def _record(monkeypatch: pytest.MonkeyPatch, calls: list[tuple[str, dict[str, object]]], name: str) -> None:
    """Wrap ``ragrade.api.NAME`` so that each call is recorded, then runs the real function."""
    real: Callable[..., object] = getattr(api, name)

    @functools.wraps(real)
    def wrapper(*args: object, **kwargs: object) -> object:
        calls.append((name, dict(kwargs)))
        return real(*args, **kwargs)

    monkeypatch.setattr(api, name, wrapper)


def test_corpus_chunk_and_index_verbs_call_the_api(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    calls: list[tuple[str, dict[str, object]]] = []
    for name in ("load_corpus", "chunk", "build_index"):
        _record(monkeypatch, calls, name)
    src = tmp_path / "docs"
    src.mkdir()
    for i, topic in enumerate(("valves", "pumps", "gauges")):
        (src / f"{topic}.md").write_text(f"# {topic}\n\nThe {topic} of unit {i} open at {10 + i} bar. " * 5)
    docs, chunks, index = tmp_path / "docs.jsonl", tmp_path / "chunks.jsonl", tmp_path / "idx"

    assert main(["corpus", str(src), "--min-chars", "5", "--out", str(docs), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["documents"] == 3  # printed from what the API reported
    assert main(["chunk", str(docs), "--size", "20", "--overlap", "0", "--out", str(chunks), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["strategy"] == "recursive" and summary["chunks"] > 3 and summary["out"] == str(chunks)
    assert main(["index", str(chunks), "--out", str(index), "--no-dense", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["chunks"] == summary["chunks"]

    assert [name for name, _ in calls] == ["load_corpus", "chunk", "build_index"]
    corpus_kwargs = dict(calls[0][1])
    config = corpus_kwargs["config"]
    assert getattr(config, "min_chars", None) == 5  # the flag went into the API's settings object
    assert corpus_kwargs["out"] == docs
    assert calls[1][1]["size"] == 20 and calls[1][1]["overlap"] == 0
    assert getattr(calls[2][1]["config"], "dense", None) is False
    assert index.is_dir() and chunks.is_file() and docs.is_file()


def test_a_dry_run_names_its_folder_in_the_settings_and_keeps_the_users_out_empty(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    calls: list[tuple[str, dict[str, object]]] = []
    _record(monkeypatch, calls, "load_corpus")
    src = tmp_path / "docs"
    src.mkdir()
    (src / "a.txt").write_text("The valve opens at ten bar.")
    out = tmp_path / "mine" / "docs.jsonl"
    out.parent.mkdir()
    assert main(["--dry-run", "corpus", str(src), "--out", str(out)]) == 0
    assert "made no LLM request" in capsys.readouterr().err
    written = calls[0][1]["out"]
    assert isinstance(written, Path) and written.name == "docs.jsonl"
    assert written.parent.name.startswith("ragrade-dry-run-") and not written.parent.exists()  # deleted after
    assert list(out.parent.iterdir()) == []


# ------------------------------------------------------------------ every verb goes through one API function

#: each verb of the command line -> the ``ragrade.api`` functions it calls (one per run; ``run`` calls
#: plan_job with --check, ``exam take`` the adaptive ones with --adaptive). A new verb fails
#: test_every_verb_is_listed until it is listed here with the API function it calls.
VERB_API: dict[tuple[str, ...], frozenset[str]] = {
    ("corpus",): frozenset({"load_corpus"}),
    ("chunk",): frozenset({"chunk"}),
    ("index",): frozenset({"build_index"}),
    ("search",): frozenset({"search_index"}),
    ("ask",): frozenset({"open_assistant"}),
    ("retrieval-eval",): frozenset({"evaluate_retrieval"}),
    ("compare",): frozenset({"compare_pipelines"}),
    ("run",): frozenset({"run_job", "plan_job"}),
    ("demo",): frozenset({"demo"}),
    ("report",): frozenset({"render_report"}),
    ("label",): frozenset({"write_label_page"}),
    ("cache", "info"): frozenset({"cache_info"}),
    ("cache", "clear"): frozenset({"clear_cache"}),
    ("llm", "probe"): frozenset({"probe_llm"}),
    ("exam", "generate"): frozenset({"generate_exam"}),
    ("exam", "stats"): frozenset({"exam_stats"}),
    ("exam", "take"): frozenset({"take_exam", "take_exam_adaptive", "plan_adaptive"}),
    ("irt", "fit"): frozenset({"fit_irt"}),
    ("irt", "improve"): frozenset({"improve_exam"}),
    ("robust", "run"): frozenset({"run_testbed"}),
    ("robust", "build"): frozenset({"build_testbeds"}),
    ("robust", "table"): frozenset({"robust_table"}),
    ("qa", "generate"): frozenset({"generate_qa"}),
    ("qa", "answer"): frozenset({"answer_qa"}),
    ("judge", "score"): frozenset({"judge_answers"}),
    ("judge", "calibrate"): frozenset({"calibrate_judge"}),
}

#: what a CLI module may import from below the API (``ragrade.<stage>``, not ``ragrade.api``/``ragrade.cli``),
#: by reason. Doing a stage's work is the API's: a verb that imports a stage function to reach around it
#: fails test_the_cli_imports_from_the_stages_only_settings_and_display until the import is listed here.
ALLOWED_BELOW_API: dict[str, frozenset[str]] = {
    # the settings objects the verbs build from their flags and --config files, and the config layer
    "ragrade.config": frozenset({"build_config", "load_toml", "deep_merge", "describe_validation"}),
    "ragrade.config_paths": frozenset({"resolve_keys", "resolve_section"}),
    "ragrade.corpus.load": frozenset({"CorpusConfig", "left_out_label"}),
    "ragrade.retrieval.index": frozenset({"IndexConfig"}),
    "ragrade.exam.config": frozenset({"ExamConfig"}),
    "ragrade.llm.options": frozenset({"LLMOptions", "MAX_RETRIES", "option_default"}),
    "ragrade.judge.run": frozenset({"JudgeRunConfig"}),
    "ragrade.judge.inputs": frozenset({"parse_field_map"}),
    "ragrade.judge.calibrate": frozenset({"CalibrationConfig"}),
    "ragrade.robust.run": frozenset({"RobustRunConfig", "ModelRun"}),
    "ragrade.qa.generate": frozenset({"QAGenConfig"}),
    "ragrade.irt.problem": frozenset({"FitConfig"}),
    "ragrade.irt.fit": frozenset({"FitConfig"}),
    "ragrade.irt.model": frozenset({"Bounds", "Priors"}),
    "ragrade.run.spec": frozenset({"SweepConfig", "build_sweep_config", "load_sweep_file"}),
    # how a result is printed (text of what the API returned)
    "ragrade.exam.analytics": frozenset({"exam_analytics", "format_analytics"}),
    "ragrade.exam.funnel": frozenset({"shortfall_line"}),
    "ragrade.retrieval.ask": frozenset({"Assistant", "render"}),
    "ragrade.retrieval.metrics": frozenset({"METRICS"}),
    "ragrade.robust.metrics": frozenset({"FLAGGED_MEANING"}),
    "ragrade.robust.table": frozenset({"build_table", "render_table"}),
    "ragrade.run.compare": frozenset({"Verdicts", "interval_text"}),
    "ragrade.run.summary": frozenset({"RULE_NAMES"}),
    "ragrade.job.progress": frozenset({"make_display"}),
    "ragrade.job.demo": frozenset({"default_out"}),
    # errors, exit codes, signals, progress display, the dry run's counts, help texts
    "ragrade.errors": frozenset({"BackendError", "ConfigError", "RagradeError", "render_settings"}),
    "ragrade.llm.failures": frozenset({"MAX_FAILED_HELP"}),
    "ragrade.llm": frozenset({"failures"}),
    "ragrade.llm.dryrun": frozenset({"LEDGER"}),
    "ragrade.progress": frozenset({"Progress"}),
    "ragrade.redact": frozenset({"redact_text"}),
    # a write that failed for lack of space or permission, an output folder that is a file (one line each)
    "ragrade.storage": frozenset({"NO_PERMISSION", "folder_expected", "write_failure"}),
    # the stated size limits, and how an error quotes a huge input
    "ragrade.schemas": frozenset({"MAX_QUESTION_CHARS", "cut_long_words", "size_error"}),
    "ragrade": frozenset({"api", "interrupt"}),
    "ragrade._version": frozenset({"__version__"}),
}

CLI = Path(__file__).resolve().parents[2] / "src" / "ragrade" / "cli"


def _verbs() -> dict[tuple[str, ...], Callable[..., object]]:
    """Every leaf command of ``ragrade`` by its words, with its callback."""
    import typer.main

    from ragrade.cli.app import app

    found: dict[tuple[str, ...], Callable[..., object]] = {}

    def walk(cmd: object, path: tuple[str, ...]) -> None:
        subs = getattr(cmd, "commands", None)
        if isinstance(subs, dict):
            for name, sub in subs.items():
                walk(sub, (*path, name))
            return
        callback = getattr(cmd, "callback", None)
        assert callable(callback), path
        found[path] = callback

    walk(typer.main.get_command(app), ())
    return found


class _Module:
    """A CLI module's functions by name and what each name it imported refers to (``module``, ``name``)."""

    def __init__(self, name: str, root: Path) -> None:
        import ast

        tree = ast.parse((root / f"{name.rsplit('.', 1)[-1]}.py").read_text(encoding="utf-8"))
        self.functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
        self.imported: dict[str, tuple[str, str]] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                for alias in node.names:
                    self.imported[alias.asname or alias.name] = (node.module, alias.name)


def _api_calls(module: str, function: str, root: Path = CLI, seen: set[tuple[str, str]] | None = None) -> set[str]:
    """The ``ragrade.api`` functions ``function`` of CLI ``module`` (a file in ``root``) calls, following its
    calls into the CLI's own module-level functions (``api.NAME(...)`` or a name imported from ``ragrade.api``)."""
    import ast

    seen = set() if seen is None else seen
    if (module, function) in seen:
        return set()
    seen.add((module, function))
    mod = _Module(module, root)
    calls: set[str] = set()
    for node in ast.walk(mod.functions[function]):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            if mod.imported.get(func.value.id) == ("ragrade", "api"):
                calls.add(func.attr)
        elif isinstance(func, ast.Name):
            source = mod.imported.get(func.id)
            if source is not None and source[0].startswith("ragrade.api"):
                calls.add(source[1])
            elif source is not None and source[0].startswith("ragrade.cli."):
                if source[1] in _Module(source[0], root).functions:
                    calls |= _api_calls(source[0], source[1], root, seen)
            elif func.id in mod.functions:
                calls |= _api_calls(module, func.id, root, seen)
    return calls


def test_every_verb_is_listed() -> None:
    assert set(_verbs()) == set(VERB_API)


def test_each_verb_calls_the_api_functions_listed_for_it() -> None:
    for verb, callback in _verbs().items():
        called = _api_calls(callback.__module__, callback.__name__)
        assert called == VERB_API[verb], (verb, sorted(called))


def test_the_api_functions_are_exported_documented_and_typed() -> None:
    import inspect

    for name in sorted(frozenset().union(*VERB_API.values())):
        assert name in api.__all__, name
        function = getattr(api, name)
        assert (function.__doc__ or "").strip(), f"{name} has no docstring"
        returns = inspect.signature(function).return_annotation
        assert returns not in (inspect.Signature.empty, None, "None"), f"{name} returns nothing"
        assert "show" not in inspect.signature(function).parameters, f"{name} hands its result to a callback"


def test_the_cli_imports_from_the_stages_only_settings_and_display() -> None:
    import ast

    wrong = []
    for path in sorted(CLI.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                wrong += [f"{path.name}: import {a.name}" for a in node.names if a.name.startswith("ragrade")]
            if not isinstance(node, ast.ImportFrom) or not (node.module or "").startswith("ragrade"):
                continue
            module = node.module or ""
            if module.startswith(("ragrade.api", "ragrade.cli")):
                continue
            allowed = ALLOWED_BELOW_API.get(module, frozenset())
            wrong += [f"{path.name}: from {module} import {a.name}" for a in node.names if a.name not in allowed]
    assert not wrong, wrong


def test_the_static_check_finds_a_verb_that_reaches_around_the_api(tmp_path: Path) -> None:
    # the checker itself: a CLI function calling the API through a helper, and one that calls none
    (tmp_path / "probe_mod.py").write_text(
        "from ragrade import api\nfrom ragrade.api import take_exam\n\n"
        "def verb():\n    helper()\n\ndef helper():\n    api.exam_stats('x')\n    take_exam('e', 'o')\n\n"
        "def around():\n    from ragrade.run.compare import verdicts\n    verdicts('run')\n",
        encoding="utf-8",
    )
    assert _api_calls("ragrade.cli.probe_mod", "verb", tmp_path) == {"exam_stats", "take_exam"}
    assert _api_calls("ragrade.cli.probe_mod", "around", tmp_path) == set()
