from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from ragrade.cli.main import main
from ragrade.errors import ConfigError, DataError
from ragrade.judge.inputs import parse_field_map, read_answers
from ragrade.judge.llm_judges import format_contexts


def _write(path: Path, rows: Sequence[object]) -> Path:
    path.write_text("\n".join(json.dumps(r) if isinstance(r, dict) else str(r) for r in rows) + "\n")
    return path


def test_default_names_and_shapes(tmp_path: Path) -> None:
    p = _write(
        tmp_path / "a.jsonl",
        [
            {"ragrade": {"kind": "qa_answers", "version": 1}},
            {
                "id": "1",
                "pipeline": "bm25",
                "question": "Q?",
                "response": "A",
                "contexts": "one passage",
                "ground_truth": ["x", "y"],
            },
            {"question": "Q2?", "answer": "B", "retrieved_contexts": [{"page_content": "p1"}, "p2", ""]},
            {"question": "Q2?", "answer": "B"},
            {"question": "Q3?", "answer": None, "error": "timeout"},
        ],
    )
    items = read_answers(p)
    assert [it.config for it in items] == ["bm25", "all", "all", "all"]
    assert items[0].references == ("x", "y") and items[0].contexts == ("one passage",)
    assert items[1].contexts == ("p1", "p2")
    assert items[1].id != items[2].id and items[2].id.endswith("-2")  # identical rows get distinct ids
    assert items[3].error == "timeout" and items[3].answer is None


def test_field_map_with_dotted_paths(tmp_path: Path) -> None:
    p = _write(tmp_path / "b.jsonl", [{"in": {"text": "Q"}, "out": {"answer": "A", "docs": ["d"]}, "gold": "A"}])
    [it] = read_answers(
        p, parse_field_map(["query=in.text", "answer=out.answer", "contexts=out.docs", "reference=gold"])
    )
    assert (it.query, it.answer, it.contexts, it.references) == ("Q", "A", ("d",), ("A",))


def test_input_errors(tmp_path: Path) -> None:
    p = _write(tmp_path / "c.jsonl", [{"q": "Q", "resp": "A"}])
    with pytest.raises(ConfigError, match=r"no record of .* has that field; fields present: q, resp"):
        read_answers(p, {"answer": "response"})
    with pytest.raises(ConfigError, match="no record has an answer field"):
        read_answers(p)
    with pytest.raises(ConfigError, match="TARGET=SOURCE"):
        parse_field_map(["query"])
    with pytest.raises(ConfigError, match="valid targets"):
        parse_field_map(["question=q"])
    dup = _write(tmp_path / "d.jsonl", [{"id": 1, "answer": "a"}, {"id": 1, "answer": "b"}])
    with pytest.raises(DataError, match=r"d.jsonl:2: duplicate answer id '1'"):
        read_answers(dup)
    bad = _write(tmp_path / "e.jsonl", ['{"answer": "a"}', "{not json"])
    with pytest.raises(DataError, match=r"e\.jsonl:2"):
        read_answers(bad)


def test_contexts_are_numbered_and_cut_visibly() -> None:
    text = format_contexts(["a" * 50, "b" * 50, "c" * 50], max_chars=80)
    assert text.startswith("[1] aaa") and "[...]" in text and "more passage(s) left out" in text


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--metrics", "corectness"], "Did you mean 'correctness'"),
        (["--metrics", "correctness"], "need --llm"),
        (["--metrics", "exact", "--field", "answer=nope"], "--field answer=nope"),
        (["--metrics", "exact", "--field", "oops"], "TARGET=SOURCE"),
        (["--metrics", "exact", "--screen-top", "1"], "add it to --metrics"),
        (["--metrics", "exact", "--samples", "0"], "samples"),
        (["--metrics", "correctness", "--llm", "openai/x", "--prompt", "correctness=/no/such.txt"], "cannot read"),
        (["--metrics", "exact", "--prompt", "exact=p.txt"], "prompts exist for"),
    ],
)
def test_cli_bad_input_exits_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    p = _write(tmp_path / "a.jsonl", [{"question": "Q", "answer": "A", "reference": "A"}])
    code = main(["judge", str(p), "--out", str(tmp_path / "o"), *args])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("ragrade: error:") and err.count("\n") == 1, err
    assert message in err


def test_cli_refuses_to_clobber_another_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = _write(tmp_path / "a.jsonl", [{"question": "Q", "answer": "A", "reference": "A"}])
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "manifest.json").write_text('{"kind": "exam-sweep"}')
    assert main(["judge", str(p), "--metrics", "exact", "--out", str(run_dir)]) == 2
    assert "subfolder" in capsys.readouterr().err
    assert main(["judge", str(tmp_path / "missing.jsonl"), "--metrics", "exact", "--out", str(tmp_path / "o")]) == 2


def test_cli_exact_only_and_resume(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = _write(
        tmp_path / "a.jsonl",
        [
            {"id": "1", "question": "Q", "answer": "the Paris", "reference": "Paris"},
            {"id": "2", "question": "Q", "answer": "Lyon", "reference": "Paris"},
            {"id": "3", "question": "Q", "answer": "x"},
        ],
    )
    out = tmp_path / "o"
    assert main(["judge", str(p), "--metrics", "exact", "--out", str(out), "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["totals"]["exact"] == {"ok": 2, "unparsed": 0, "failed": 0, "skipped": 1}
    assert s["configs"]["all"]["exact"]["skip_reasons"] == {"no reference": 1}
    assert main(["judge", str(p), "--metrics", "exact", "--out", str(out), "--json"]) == 0
    s2 = json.loads(capsys.readouterr().out)
    assert s2["runs"]["exact"] == {"reused": 2, "skipped": 1, "scored": 0}  # a skip is checked again (cheap)
