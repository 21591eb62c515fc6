"""Bad input caught up front (issue 25, point 8): exit 2, one ``ragrade: error:`` line naming the problem, no
traceback, and no run folder or output written.

A damaged calibration table, an unknown or bad ``transform_options`` entry, a judge LLM that cannot judge or
is not there, an empty prompt file, and ``ragrade run --check`` on ``[adaptive]``, ``[calibration] human``,
``[sweep] query`` and ``[judge] judge_llm`` settings that used to fail only after the earlier stages ran.
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
        "adaptive-target": ("[adaptive]\nenabled = true\ntarget_se = 0\n", "[adaptive] --target-se must be positive"),
        "adaptive-no-file": ('[adaptive]\nenabled = true\ncalibration_mode = "file"\n', "needs --calibration"),
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
            f'{judge}metrics = ["claims"]\njudge_llm = "offline/student"\n',
            "[judge] judge_llm = offline/student cannot judge claims",
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
