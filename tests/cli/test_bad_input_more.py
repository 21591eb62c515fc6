"""Bad input caught up front (issue 25, point 8): exit 2, one ``ragrade: error:`` line naming the problem, no
traceback, and no run folder or output written.

A damaged calibration table, an unknown or bad ``transform_options`` entry, a judge LLM that cannot judge or
is not there, an empty prompt file, and ``ragrade run --check`` on ``[adaptive]``, ``[calibration] human``,
``[sweep] query`` and ``[judge] judge_llm`` settings that used to fail only after the earlier stages ran; and
(issue 38) settings once taken without a word: a value repeated on a grid axis, ``max_retries`` beyond 0..100 or
not whole, a ``qa generate --prompt`` file without ``{passage}``, and ``robust run --min-positives`` above every
question's supporting passages.
One small BM25-only index and a hand-made exam are built once for the module.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from tests.cli.test_cli_fuzz import DOC, TOPICS, Cap, _assert_user_error, _run, _write_exam
from tests.support.openai_server import OpenAIServer, dead_base_url

from ragrade.cli.main import main


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("bad-input")
    docs = root / "docs"
    docs.mkdir()
    for n, t in enumerate(TOPICS):
        (docs / f"{t}.md").write_text(DOC.format(t=t, i=n * 7, j=n + 2, k=n * 3 + 1), encoding="utf-8")
    p = {"root": root, "docs": docs, "idx": root / "idx", "exam": root / "exam.jsonl"}
    assert main(["corpus", str(docs), "--out", str(root / "docs.jsonl")]) == 0
    assert main(["index", str(root / "docs.jsonl"), "--out", str(p["idx"]), "--size", "60", "--no-dense"]) == 0
    _write_exam(p["idx"] / "chunks.jsonl", p["exam"])
    return p


def _ids(exam: Path) -> list[str]:
    return [json.loads(line)["id"] for line in exam.read_text(encoding="utf-8").splitlines()[1:]]


# ----------------------------------------------------------------------------- --calibration irt.json + items table


def _items_table(exam: Path, how: str) -> bytes | pd.DataFrame:
    ids = _ids(exam)
    tables: dict[str, bytes | pd.DataFrame] = {
        "garbage": b"this is not parquet",
        "no-question-id": pd.DataFrame({"difficulty": [0.0] * len(ids)}),
        "no-difficulty": pd.DataFrame({"question_id": ids, "discrimination": [1.0] * len(ids)}),
        "text-difficulty": pd.DataFrame({"question_id": ids, "difficulty": ["hard"] + ["0.5"] * (len(ids) - 1)}),
        "duplicate-question": pd.DataFrame({"question_id": [ids[0]] * 2, "difficulty": [0.0, 1.0]}),
    }
    return tables[how]


@pytest.mark.parametrize(
    ("how", "words"),
    [
        ("garbage", "not a readable Parquet table"),
        ("no-question-id", "missing column 'question_id'"),
        ("no-difficulty", "missing column 'difficulty'"),
        ("text-difficulty", "'difficulty' must hold numbers, got 'hard'"),
        ("duplicate-question", "appears 2 times"),
    ],
)
def test_damaged_calibration_items_table(
    how: str, words: str, base: dict[str, Path], tmp_path: Path, capsys: Cap
) -> None:
    irt = tmp_path / "irt.json"
    irt.write_text(json.dumps({"kind": "irt", "version": 2, "tables": {"items": "irt_items.parquet"}}), "utf-8")
    table = _items_table(base["exam"], how)
    if isinstance(table, bytes):
        (tmp_path / "irt_items.parquet").write_bytes(table)
    else:
        table.to_parquet(tmp_path / "irt_items.parquet")
    out = tmp_path / "run"
    code, _, err = _run(["exam", "take", base["exam"], "--llm", "offline/student", "--retrievers", "closed",
                         "--adaptive", "--calibration", irt, "--out", out], capsys)  # fmt: skip
    _assert_user_error(code, err, "irt_items.parquet", words)
    assert not out.exists()


def test_calibration_item_that_is_not_an_object(base: dict[str, Path], tmp_path: Path, capsys: Cap) -> None:
    irt = tmp_path / "irt.json"
    irt.write_text(json.dumps({"kind": "irt", "version": 1, "items": {"q0": [1, 2]}}), "utf-8")
    out = tmp_path / "run"
    code, _, err = _run(["exam", "take", base["exam"], "--llm", "offline/student", "--retrievers", "closed",
                         "--adaptive", "--calibration", irt, "--out", out], capsys)  # fmt: skip
    _assert_user_error(code, err, "item 'q0' is not an object")
    assert not out.exists()


# ----------------------------------------------------------------------------- transform_options


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ("compress = { bogus = 1 }", "compress has no option 'bogus'; valid: embedder, budget"),
        ("compress = { bugdet = 30 }", "Did you mean 'budget'?"),
        ("mmr = { lamda = 0.5 }", "Did you mean 'lambda'?"),
        ("compres = { budget = 30 }", "unknown transform 'compres'"),
        ("post = { dpeth = 5 }", "Did you mean 'depth'?"),
        ("compress = 3", "transform_options.compress: Input should be a valid dictionary"),
        ("compress = { budget = 0 }", "compress budget must be positive, got 0"),  # a value: checked when built
    ],
)
def test_exam_take_checks_transform_options_before_its_run_folder(
    options: str, words: str, base: dict[str, Path], tmp_path: Path, capsys: Cap
) -> None:
    sweep = tmp_path / "sweep.toml"
    sweep.write_text(
        f'[indexes]\nr = "{base["idx"]}"\n[grid]\nllms = ["offline/student"]\nretrievers = ["bm25"]\n'
        f'post = ["compress"]\n[transform_options]\n{options}\n',
        encoding="utf-8",
    )
    out = tmp_path / "run"
    code, _, err = _run(["exam", "take", base["exam"], "--config", sweep, "--out", out], capsys)
    _assert_user_error(code, err, words)
    assert not out.exists()


def test_every_transform_tells_its_options() -> None:
    from ragrade.registry import names
    from ragrade.retrieval.transforms import POST_KIND, QUERY_KIND, accepted_options

    got = {n: accepted_options(k, n) for k in (QUERY_KIND, POST_KIND) for n in names(k)}
    assert got["rm3"] == ("fb_docs", "fb_terms")
    assert got["hyde"] == ("max_tokens", "keep_query") and got["multi-query"] == ("n", "max_tokens")
    assert got["mmr"] == ("embedder", "lambda")  # the factory's own keyword, then lambda_ written as in TOML
    assert got["threshold"] == ("embedder", "min_similarity", "min_keep") and got["none"] == ()
    assert all(v is not None for v in got.values()), got  # every registered component is checked by name


# ----------------------------------------------------------------------------- the judge LLM


def _answers(tmp_path: Path) -> Path:
    path = tmp_path / "answers.jsonl"
    rows = [{"id": f"a{i}", "query": f"How often do the {t} keys rotate?", "answer": f"every {i + 2} days",
             "contexts": [f"The {t} subsystem rotates it every {i + 2} days."], "reference": f"every {i + 2} days",
             "config": "mine"} for i, t in enumerate(TOPICS[:2])]  # fmt: skip
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.mark.parametrize("llm", ["offline/student", "offline/extractive", "replay/student"])
def test_a_baseline_cannot_be_the_claims_judge(llm: str, tmp_path: Path, capsys: Cap) -> None:
    out = tmp_path / "judge"
    code, _, err = _run(["judge", _answers(tmp_path), "--metrics", "claims", "--llm", llm, "--out", out], capsys)
    _assert_user_error(code, err, f"--llm {llm} cannot judge claims", "offline/judge (the offline claims baseline)")
    assert not out.exists()
    code, _, err = _run(["judge", _answers(tmp_path), "--metrics", "exact,correctness", "--llm", llm,
                         "--out", out], capsys)  # fmt: skip
    _assert_user_error(code, err, f"--llm {llm} cannot judge correctness")
    assert "offline/judge" not in err and not out.exists()


@pytest.mark.parametrize("metric", ["claims", "correctness"])
def test_an_unreachable_judge_server_is_a_setup_error(metric: str, tmp_path: Path, capsys: Cap) -> None:
    out, url = tmp_path / "judge", dead_base_url()
    code, _, err = _run(["judge", _answers(tmp_path), "--metrics", metric, "--llm", "openai/m", "--llm-base-url",
                         url, "--max-retries", "0", "--out", out], capsys)  # fmt: skip
    _assert_user_error(code, err, "the judge LLM openai/m is unreachable at", url.removesuffix("/v1"), "refused")
    assert "first error: failed" not in err and not out.exists()


def test_a_live_judge_server_passes_the_check_without_a_request(tmp_path: Path, capsys: Cap) -> None:
    from ragrade.judge.run import check_reachable
    from ragrade.llm import create_llm

    with OpenAIServer() as srv:
        check_reachable(create_llm("openai/m", base_url=srv.base_url, cache=False))
        assert srv.requests_total == 0


def test_failed_claims_records_report_their_error(tmp_path: Path) -> None:
    from ragrade.judge.run import request_failures

    recs = [{"config": "c", "id": "a", "metric": "claims", "status": "failed", "error": "HTTP 500: model crashed"}]
    assert request_failures(recs) == {"groups": {"c / claims": [1, 1]}, "errors": ["HTTP 500: model crashed"]}


# ----------------------------------------------------------------------------- prompt files


@pytest.mark.parametrize(("flag", "content"), [("--prompt", ""), ("--system-prompt", "  \n\n")])
def test_exam_generate_refuses_an_empty_prompt_file(
    flag: str, content: str, base: dict[str, Path], tmp_path: Path, capsys: Cap
) -> None:
    prompt = tmp_path / "prompt.txt"
    prompt.write_text(content, encoding="utf-8")
    out = tmp_path / "exam.jsonl"
    code, _, err = _run(["exam", "generate", base["idx"], "--n", "2", "--llm", "offline", flag, prompt,
                         "--out", out], capsys)  # fmt: skip
    _assert_user_error(code, err, str(prompt), "the prompt file is empty")
    assert list(tmp_path.iterdir()) == [prompt]


# ----------------------------------------------------------------------------- ragrade run --check


def _job_cases(p: dict[str, Path], t: Path) -> dict[str, tuple[str, str]]:
    (t / "garbage.json").write_bytes(b"\xff\xfe")
    (t / "bad.jsonl").write_text("not json\n", encoding="utf-8")
    (t / "wrong-metric.jsonl").write_text('{"id": "a", "metric": "correctness", "label": 4}\n', encoding="utf-8")
    (t / "off-scale.jsonl").write_text('{"id": "a", "metric": "exact", "label": 3}\n', encoding="utf-8")
    few = "".join(json.dumps({"id": f"a{i}", "metric": "exact", "label": i % 2}) + "\n" for i in range(4))
    (t / "few.jsonl").write_text(few, encoding="utf-8")
    judge = "[judge]\nenabled = true\n"
    return {
        "query-typo": ('[sweep]\nquery = ["none", "hdye"]\n', "[sweep] unknown query_transform 'hdye'"),
        "query-needs-llm": ('[sweep]\nquery = ["hyde"]\n', "transform_llm"),
        "post-typo": ('[sweep]\npost = ["mmr+compres"]\n', "Did you mean 'compress'?"),
        "transform-option": (
            '[sweep]\npost = ["compress"]\ntransform_options = { compress = { bogus = 1 } }\n',
            "compress has no option 'bogus'",
        ),
        "transform-llm": ('[sweep]\nquery = ["hyde"]\ntransform_llm = "nosuch/m"\n', "[sweep] transform_llm"),
        "adaptive-target": ("[adaptive]\nenabled = true\ntarget_se = 0\n", "[adaptive] target_se must be positive"),
        "adaptive-no-file": ('[adaptive]\nenabled = true\ncalibration_mode = "file"\n', "needs calibration"),
        "adaptive-missing": (f'[adaptive]\nenabled = true\ncalibration = "{t / "no.json"}"\n', "not found"),
        "adaptive-garbage": (f'[adaptive]\nenabled = true\ncalibration = "{t / "garbage.json"}"\n', "garbage.json"),
        "adaptive-reference": (
            '[adaptive]\nenabled = true\ncalibration_mode = "reference"\nreference = ["nosuch"]\n',
            "no pipeline matches 'nosuch'",
        ),
        "human-missing": (f'{judge}[calibration]\nhuman = "{t / "no.jsonl"}"\n', "[calibration] human: labels file"),
        "human-garbage": (f'{judge}[calibration]\nhuman = "{t / "bad.jsonl"}"\n', "bad.jsonl:1: not valid JSON"),
        "human-metric": (
            f'{judge}[calibration]\nhuman = "{t / "wrong-metric.jsonl"}"\n',
            "metric 'correctness' is not in [judge] metrics",
        ),
        "human-scale": (
            f'{judge}metrics = ["exact"]\n[calibration]\nhuman = "{t / "off-scale.jsonl"}"\n',
            "outside the exact scale",
        ),
        "human-few": (f'{judge}metrics = ["exact"]\n[calibration]\nhuman = "{t / "few.jsonl"}"\n', "needs at least 10"),
        "judge-llm-student": (
            f'{judge}metrics = ["claims"]\nllm = "offline/student"\n',
            "[judge] llm offline/student cannot judge claims",
        ),
        # issue 38: settings that used to be taken without a word
        "sweep-k-repeated": ("[sweep]\nk = [3, 3]\n", "sweep.k: 3 is listed twice; list each value once"),
        "sweep-retriever-repeated": ('[sweep]\nretrievers = ["bm25", "closed", "bm25"]\n', "sweep.retrievers: 'bm25'"),
        "judge-retriever-repeated": (f'{judge}retrievers = ["bm25", "bm25"]\n', "judge.retrievers: 'bm25' is listed"),
        "llm-max-retries-huge": (
            "[llm_options]\nmax_retries = 1e9\n",
            "llm_options.max_retries: Input should be less than or equal to 100",
        ),
        "llm-max-retries-fraction": (
            "[llm_options]\nmax_retries = 2.5\n",
            "llm_options.max_retries: Input should be a valid integer",
        ),
    }


def test_run_check_validates_what_the_stages_validate(base: dict[str, Path], tmp_path: Path, capsys: Cap) -> None:
    head = (f'[corpus]\npaths = ["{base["docs"]}"]\n[[chunkers]]\nstrategy = "recursive"\nsize = 60\n'
            f'[robust]\nenabled = false\n')  # fmt: skip
    failures = []
    for name, (table, words) in _job_cases(base, tmp_path).items():
        job, out = tmp_path / f"{name}.toml", tmp_path / f"out-{name}"
        job.write_text(head + table, encoding="utf-8")
        for argv in (["run", job, "--check", "--out", out], ["run", job, "--out", out]):
            code, _, err = _run(argv, capsys)
            try:
                _assert_user_error(code, err, words)
                assert not out.exists(), f"{out} was created"
            except AssertionError as exc:
                failures.append(f"{name} ({' '.join(map(str, argv[2:-2]))}): {exc}")
    assert not failures, "\n".join(failures)


def test_run_check_still_passes_good_adaptive_and_label_settings(
    base: dict[str, Path], tmp_path: Path, capsys: Cap
) -> None:
    labels = "".join(json.dumps({"id": f"a{i}", "metric": "exact", "label": i % 2}) + "\n" for i in range(10))
    (tmp_path / "labels.jsonl").write_text(labels, encoding="utf-8")
    job = tmp_path / "job.toml"
    job.write_text(
        f'[corpus]\npaths = ["{base["docs"]}"]\n[sweep]\nretrievers = ["closed", "bm25"]\npost = ["none", "mmr"]\n'
        "transform_options = { mmr = { lambda = 0.3 }, post = { depth = 6 } }\n"
        '[adaptive]\nenabled = true\ncalibration_mode = "reference"\nreference = ["closed"]\n'
        f'[judge]\nenabled = true\nmetrics = ["exact"]\n[calibration]\nhuman = "{tmp_path / "labels.jsonl"}"\n',
        encoding="utf-8",
    )
    code, out, err = _run(["run", job, "--check", "--out", tmp_path / "o"], capsys)
    assert code == 0, err
    assert "stage(s) to run" in out + err and not (tmp_path / "o").exists()


def test_adaptive_exam_take_checks_option_values_before_its_run_folder(
    base: dict[str, Path], tmp_path: Path, capsys: Cap
) -> None:
    sweep = tmp_path / "sweep.toml"
    sweep.write_text(
        f'[indexes]\nr = "{base["idx"]}"\n[grid]\nllms = ["offline/student"]\nretrievers = ["bm25", "closed"]\n'
        'post = ["compress"]\n[transform_options]\ncompress = { budget = 0 }\n',
        encoding="utf-8",
    )
    out = tmp_path / "run"
    args = ["exam", "take", base["exam"], "--config", sweep, "--adaptive", "--out", out]
    code, _, err = _run(args, capsys)
    _assert_user_error(code, err, "compress budget must be positive, got 0")
    assert not out.exists()


# ----------------------------------------------------------------------------- issue 38: settings taken without a word


@pytest.mark.parametrize(
    ("flags", "sweep", "words"),
    [
        (["--k", "3,3"], "", "grid.k: 3 is listed twice; list each value once"),
        (["--retrievers", "bm25,closed,bm25"], "", "grid.retrievers: 'bm25' is listed twice"),
        (["--icl", "0,1,0"], "", "grid.icl: 0 is listed twice"),
        (["--llm", "offline/student,offline/student"], "", "grid.llms: 'offline/student' is listed twice"),
        (["--chunkers", "r,r"], "", "grid.chunkers: 'r' is listed twice"),
        ([], "[grid]\nk = [3, 3]\n", "grid.k: 3 is listed twice"),
        ([], '[grid]\npost = ["none", "mmr", "none"]\n', "grid.post: 'none' is listed twice"),
        ([], '[grid]\nretrievers = ["bm25", "bm25"]\n[external]\nmine = "mod:fn"\n', "grid.retrievers: 'bm25'"),
    ],
)
def test_exam_take_refuses_a_value_repeated_on_a_grid_axis(
    flags: list[str], sweep: str, words: str, base: dict[str, Path], tmp_path: Path, capsys: Cap
) -> None:
    args: list[object] = ["exam", "take", base["exam"], "--index", f"r={base['idx']}", *flags]
    if sweep:
        (tmp_path / "sweep.toml").write_text(sweep, encoding="utf-8")
        args += ["--config", tmp_path / "sweep.toml"]
    if "--llm" not in flags:
        args += ["--llm", "offline/student"]
    if "--retrievers" not in flags and "retrievers" not in sweep:
        args += ["--retrievers", "bm25"]
    out = tmp_path / "run"
    code, _, err = _run([*args, "--out", out], capsys)
    _assert_user_error(code, err, words)
    assert not out.exists()


def test_every_grid_axis_refuses_a_repeated_value() -> None:
    from pydantic import ValidationError

    from ragrade.run.spec import GRID_AXES, GridConfig

    assert tuple(GridConfig.model_fields) == GRID_AXES  # a new axis is checked too
    for axis, value in GridConfig().model_dump().items():
        if value is None:  # chunkers: every index by default
            value = ["r"]
        with pytest.raises(ValidationError, match=f"{value[0]!r} is listed twice"):
            GridConfig.model_validate({axis: [value[0], value[0]]})
    assert GridConfig(k=[1, 3], retrievers=["closed", "bm25"]).k == [1, 3]  # distinct values are kept in order


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("1000000000", "--max-retries': Input should be less than or equal to 100"),
        ("1e9", "--max-retries': Input should be a valid integer"),
        ("2.5", "--max-retries': Input should be a valid integer"),
        ("-1", "--max-retries': Input should be greater than or equal to 0"),
    ],
)
def test_max_retries_flag_is_bounded(
    value: str, words: str, base: dict[str, Path], tmp_path: Path, capsys: Cap
) -> None:
    out = tmp_path / "run"
    code, _, err = _run(["exam", "take", base["exam"], "--index", f"r={base['idx']}", "--llm", "offline/student",
                         "--retrievers", "bm25", "--max-retries", value, "--out", out], capsys)  # fmt: skip
    _assert_user_error(code, err, words)
    assert not out.exists()


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("1e9", "llm_options.max_retries: Input should be less than or equal to 100 (got 1000000000.0)"),
        ("101", "llm_options.max_retries: Input should be less than or equal to 100 (got 101)"),
        ("2.5", "llm_options.max_retries: Input should be a valid integer, got a number with a fractional part"),
    ],
)
def test_max_retries_in_a_sweep_file_is_bounded(
    value: str, words: str, base: dict[str, Path], tmp_path: Path, capsys: Cap
) -> None:
    sweep = tmp_path / "sweep.toml"
    sweep.write_text(f"[llm_options]\nmax_retries = {value}\n", encoding="utf-8")
    out = tmp_path / "run"
    code, _, err = _run(["exam", "take", base["exam"], "--index", f"r={base['idx']}", "--llm", "offline/student",
                         "--retrievers", "bm25", "--config", sweep, "--out", out], capsys)  # fmt: skip
    _assert_user_error(code, err, words)
    assert not out.exists()


def test_max_retries_is_bounded_in_the_options_and_the_limits() -> None:
    from pydantic import ValidationError

    from ragrade.errors import ConfigError
    from ragrade.llm.limits import LimitConfig
    from ragrade.llm.options import MAX_RETRIES, LLMOptions

    assert LLMOptions(max_retries=MAX_RETRIES).max_retries == 100 and LLMOptions(max_retries=0).max_retries == 0
    for bad in (101, 10**9, 2.5, -1):
        with pytest.raises(ValidationError, match="max_retries"):
            LLMOptions.model_validate({"max_retries": bad})
        with pytest.raises(ConfigError, match="max_retries must be a whole number from 0 to 100"):
            LimitConfig(max_retries=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("llm", ["offline", "openai/m"])
def test_qa_generate_refuses_a_prompt_without_its_placeholder(
    llm: str, base: dict[str, Path], tmp_path: Path, capsys: Cap
) -> None:
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("Write one question and its answer about the text above.\n", encoding="utf-8")
    out = tmp_path / "qa.jsonl"
    code, _, err = _run(["qa", "generate", base["idx"], "--n", "2", "--llm", llm, "--llm-base-url", dead_base_url(),
                         "--max-retries", "0", "--prompt", prompt, "--out", out], capsys)  # fmt: skip
    line = _assert_user_error(code, err, f"{prompt}: the prompt must contain the placeholder {{passage}}")
    assert line.endswith("(also available: {source})")
    assert list(tmp_path.iterdir()) == [prompt]
    # the check `exam generate --prompt` makes, worded the same way
    code, _, err = _run(["exam", "generate", base["idx"], "--n", "2", "--llm", "offline", "--prompt", prompt,
                         "--out", out], capsys)  # fmt: skip
    _assert_user_error(code, err, f"{prompt}: the prompt must contain the placeholder {{document}}")
    assert list(tmp_path.iterdir()) == [prompt]


def test_qa_generate_still_takes_a_prompt_with_its_placeholder(
    base: dict[str, Path], tmp_path: Path, capsys: Cap
) -> None:
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("Passage from {source}:\n{passage}\nWrite one question.\n", encoding="utf-8")
    out = tmp_path / "qa.jsonl"
    code, _, err = _run(["qa", "generate", base["idx"], "--n", "2", "--llm", "offline", "--min-chars", "20",
                         "--prompt", prompt, "--out", out], capsys)  # fmt: skip
    assert code == 0, err
    assert out.is_file()


def _rgb(path: Path) -> Path:
    noise = [f"The Tallow Fair sells candles, stall {i}." for i in range(6)]
    rows = [
        {"id": "b1", "query": "Which town hosts the Tallow Fair?", "answer": "Brimholt",
         "positive": ["The Tallow Fair is held in Brimholt.", "Brimholt hosts the Tallow Fair."], "negative": noise},
        {"id": "b2", "query": "Which river runs past the Tallow Fair?", "answer": "the Ashby",
         "positive": ["The Tallow Fair lies on the Ashby."], "negative": noise},
    ]  # fmt: skip
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_robust_run_refuses_min_positives_no_question_has(tmp_path: Path, capsys: Cap) -> None:
    data = _rgb(tmp_path / "base.jsonl")
    out = tmp_path / "run"
    args: list[object] = ["robust", "run", data, "--llm", "offline/extractive", "--out", out]
    for many in ("1000000", "3"):
        code, _, err = _run([*args, "--testbed", "noise", "--min-positives", many], capsys)
        _assert_user_error(
            code, err, f"--min-positives must be between 0 and 2 (the most supporting passages of a question in {data}",
            f"for the noise testbed), got {many}: every question would be skipped",
        )  # fmt: skip
        assert not out.exists()
    code, _, err = _run([*args, "--testbed", "noise", "--min-positives", "3", "--limit", "1"], capsys)
    _assert_user_error(code, err, f"in the first 1 questions of {data} for the noise testbed")
    assert not out.exists()
    # the most any question has is taken; b2 (one passage) is skipped as before
    code, _, err = _run([*args, "--testbed", "noise", "--min-positives", "2", "--noise-ratios", "0"], capsys)
    assert code == 0, err
    metrics = json.loads((out / "metrics.json").read_text(encoding="utf-8"))
    assert metrics["n"] == 1 and metrics["skipped"] == 1
    # negative rejection shows noise only and ignores the setting, as it did
    code, _, err = _run([*args[:-1], tmp_path / "neg", "--testbed", "negative", "--min-positives", "9"], capsys)
    assert code == 0, err
