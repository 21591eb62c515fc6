"""``ragrade run CONFIG`` on a user corpus: relative paths, a text-only index, the report, JSON output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragrade.cli.main import main

pytestmark = pytest.mark.slow

TOWNS = [
    "Arlen",
    "Brisk",
    "Cobalt",
    "Dunmore",
    "Elmsford",
    "Farrow",
    "Glenholt",
    "Harwick",
    "Ivel",
    "Jorvik",
    "Kestrel",
    "Lanford",
    "Marrow",
    "Nettle",
    "Oakridge",
    "Pellam",
]
BUILDERS = [
    "Morgan Tate",
    "Lucia Ferro",
    "Anders Holm",
    "Priya Nair",
    "Tomas Varga",
    "Helen Cray",
    "Omar Sadiq",
    "Greta Lund",
    "Ivo Marek",
    "Nadia Rossi",
    "Felix Braun",
    "Sara Quist",
    "Pavel Drozd",
    "Maya Okafor",
    "Jonas Weil",
    "Clara Mendes",
]


def _corpus(root: Path) -> None:
    for i, (town, who) in enumerate(zip(TOWNS, BUILDERS, strict=True)):
        text = (
            f"The lighthouse of {town} was designed by the engineer {who} in {1801 + 7 * i}. "
            f"Its lamp burns {12 + i} litres of whale oil every night and can be seen from {20 + i} kilometres. "
            f"Keepers of {town} lighthouse record the weather in a ledger called the {town} Book. "
            f"The tower has {90 + 3 * i} steps and a red gallery facing the northern channel."
        )
        if i == 3:
            text += ' A visitor once wrote <script>document.title="pwned"</script> in the ledger.'
        sub = root / ("north" if i % 2 else "south")
        sub.mkdir(parents=True, exist_ok=True)
        (sub / f"{town.lower()}.txt").write_text(text, encoding="utf-8")


def test_run_config_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _corpus(tmp_path / "cfg" / "docs")
    cfg = tmp_path / "cfg" / "job.toml"
    cfg.write_text(
        'name = "lighthouses"\n'
        '[corpus]\npaths = ["docs"]\n'
        '[[chunkers]]\nstrategy = "recursive"\nsize = 64\noverlap = 8\n'
        "[exam]\nn = 12\nmin_chunk_chars = 60\n"
        '[sweep]\nretrievers = ["closed", "bm25", "oracle"]\nicl = [0]\n'
        '[irt]\nfactors = ["retriever"]\nimprove_steps = 1\n'
        "[robust]\nenabled = false\n",
        encoding="utf-8",
    )
    out = tmp_path / "run"
    assert main(["run", str(cfg), "--out", str(out), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["report"] == str(out / "report.html")
    assert [k for k, v in doc["stages"].items() if v["status"] == "ran"][-1] == "report"
    index = json.loads((out / "index" / "recursive-64" / "manifest.json").read_text(encoding="utf-8"))
    assert index["embedder"] is None  # no dense retriever in the sweep: BM25 only, nothing embedded
    page = (out / "report.html").read_text(encoding="utf-8")
    assert 'document.title="pwned"' not in page
    assert "lighthouse" in page.lower()
    assert main(["report", str(out), "--out", str(tmp_path / "again.html")]) == 0
