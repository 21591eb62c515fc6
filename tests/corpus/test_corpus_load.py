"""Corpus loading: every format, cleaning, and every kind of bad file reported, never crashing."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.corpus.fixtures import build_corpus

from ragrade.corpus.clean import clean_text, compile_patterns
from ragrade.corpus.load import CorpusConfig, LoadReport, load_corpus, make_doc_id
from ragrade.corpus.types import Document
from ragrade.errors import ConfigError


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_corpus(tmp_path_factory.mktemp("corpus"))


@pytest.fixture(scope="module")
def report(corpus_dir: Path) -> LoadReport:
    return load_corpus([corpus_dir], CorpusConfig())


def _by_path(report: LoadReport) -> dict[str, Document]:
    return {str(d.metadata["path"]): d for d in report.documents}


def test_good_documents_load_with_right_text(report: LoadReport) -> None:
    docs = _by_path(report)
    assert set(docs) == {
        "guide.txt",
        "notes/readme.md",
        "page.html",
        "records.jsonl:1",
        "records.jsonl:2",
        "items.json#0",
        "items.json#1",
        "report.pdf",
        "latin1.txt",
    }
    guide = docs["guide.txt"].text
    assert guide.startswith("Field Guide to Retrieval\n\nRetrieval-augmented generation answers a question")
    assert "corpus. The retriever ranks passages;\nthe generator" in guide  # spaces collapsed, lines kept
    assert docs["guide.txt"].metadata["title"] == "Field Guide to Retrieval"

    md = docs["notes/readme.md"]
    assert md.metadata["title"] == "Chunking notes" and md.metadata["author"] == "ragrade team"
    assert md.metadata["topic"] == "notes"  # first folder under the root
    assert "Embedding models read a limited number of tokens. See the guide for details." in md.text
    assert "internal comment" not in md.text and "https://" not in md.text and "---" not in md.text
    assert md.text.startswith("# Why chunk at all\n\nEmbedding")  # headings stay structure

    html = docs["page.html"]
    assert html.metadata["title"] == "Sparse retrieval"
    assert html.text.startswith("BM25 in one page")
    assert "term frequency,\ninverse document frequency" in html.text
    assert "- k1 controls saturation" in html.text
    for junk in ("tracking", "color: red", "Home", "About us", "banner", "Copyright"):
        assert junk not in html.text

    assert docs["records.jsonl:1"].id == "faq-1"
    assert docs["records.jsonl:1"].metadata["section"] == "basics"
    assert docs["records.jsonl:2"].text.startswith("Dense retrievers")
    assert docs["items.json#1"].id == "item-b" and docs["items.json#1"].metadata["tags"] == ["cjk"]
    assert docs["items.json#1"].text == "東京は日本の首都です。大阪は商業の中心です！本当ですか？"

    pdf = docs["report.pdf"]
    assert "Exams grade retrieval pipelines." in pdf.text and "IRT finds hard questions." in pdf.text
    assert pdf.metadata["title"] == "Pipeline notes" and pdf.metadata["pages"] == 1
    assert docs["latin1.txt"].text == "Café crème brûlée: naïve façade."


def test_bad_files_are_skipped_with_reasons(report: LoadReport, corpus_dir: Path) -> None:
    skipped = {Path(p.split(":")[0]).name + (":" + p.split(":")[1] if ":" in p else ""): r for p, r in report.skipped}
    assert "image.png" not in skipped and report.assets_ignored == {".png": 1}  # counted, not warned about
    assert "binary" in skipped["photo.txt"]
    assert "not valid UTF-8" in skipped["garbage.txt"]
    assert skipped["empty.txt"] == "empty file"
    assert "empty after" in skipped["blank.md"]
    assert "unreadable PDF" in skipped["broken.pdf"]
    assert "unsupported file type '.xyz'" in skipped["table.xyz"]
    assert "no text field" in skipped["records.jsonl:4"]
    assert "not valid JSON" in skipped["records.jsonl:5"]
    assert report.hidden_ignored == 1
    assert report.warnings == [(str(corpus_dir / "latin1.txt"), "not valid UTF-8; decoded as cp1252")]
    summary = report.summary()
    assert summary["documents"] == 9 and summary["skipped"] == len(report.skipped) == 8
    assert summary["skipped_by_reason"]["empty"] == 2
    assert summary["by_format"] == {"html": 1, "json": 2, "jsonl": 2, "md": 1, "pdf": 1, "txt": 2}


def test_ids_are_stable_and_content_derived(corpus_dir: Path, tmp_path: Path) -> None:
    a = load_corpus([corpus_dir]).documents
    b = load_corpus([corpus_dir]).documents
    assert [d.id for d in a] == [d.id for d in b]
    assert len({d.id for d in a}) == len(a)
    guide = next(d for d in a if d.metadata["path"] == "guide.txt")
    assert guide.id == make_doc_id("guide.txt", guide.text)
    assert guide.id.startswith("guide-txt-")
    (tmp_path / "guide.txt").write_text("Other content entirely.", encoding="utf-8")
    other = load_corpus([tmp_path / "guide.txt"]).documents[0]
    assert other.id != guide.id and other.id.startswith("guide-txt-")


def test_field_mapping_and_drop_patterns(tmp_path: Path) -> None:
    path = tmp_path / "recs.jsonl"
    path.write_text(
        '{"key": "a1", "passage": "first line\\nSOURCE: internal\\nsecond line", "lang": "en", "year": 2020}\n'
        '{"key": "a2", "passage": "third", "lang": "de", "year": 2021}\n',
        encoding="utf-8",
    )
    cfg = CorpusConfig(text_field="passage", id_field="key", meta_fields=["year"], drop_patterns=[r"^SOURCE:"])
    rep = load_corpus([path], cfg)
    assert [d.id for d in rep.documents] == ["a1", "a2"]
    assert rep.documents[0].text == "first line\nsecond line"
    assert rep.documents[0].metadata["year"] == 2020 and "lang" not in rep.documents[0].metadata
    assert rep.lines_dropped == 1
    missing = load_corpus([path], CorpusConfig(text_field="body"))
    assert not missing.documents and all("no text field (body)" in r for _, r in missing.skipped)


def test_duplicates_missing_paths_and_oversized(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("same text here", encoding="utf-8")
    (tmp_path / "b.txt").write_text("same  text here\n", encoding="utf-8")
    (tmp_path / "big.txt").write_text("x" * 5000, encoding="utf-8")
    rep = load_corpus([tmp_path, tmp_path / "nope.txt"], CorpusConfig(max_bytes=1000))
    assert [d.metadata["path"] for d in rep.documents] == ["a.txt"]
    reasons = dict(rep.skipped)
    assert reasons[str(tmp_path / "b.txt")].startswith("same text as")
    assert reasons[str(tmp_path / "big.txt")].startswith("too large (5,000 bytes")
    assert reasons[str(tmp_path / "nope.txt")] == "no such file or folder"
    assert len(load_corpus([tmp_path], CorpusConfig(dedupe=False, max_bytes=1000)).documents) == 2


def test_clean_text_rules() -> None:
    raw = "Cafe\u0301\r\nline\u00a0two\t\tend\x07\u200b\n\n\n\nnext\u2028para  \ufeff"
    assert clean_text(raw) == "Café\nline two end\n\nnext\npara"
    pats = compile_patterns([r"^<[^>]+>$", r"^Document \d+"])
    assert clean_text("<doc>\nDocument 12 of 40\nBody text.\n</doc>", pats) == "Body text."
    with pytest.raises(ConfigError, match="not a valid regular expression"):
        compile_patterns(["(unclosed"])


def test_symlink_loops_are_read_once_and_reported(tmp_path: Path) -> None:
    # issue 38.3: a folder link back to its parent was followed 40 levels deep with 40 warnings, and file link
    # loops were skipped with no message
    root = tmp_path / "docs"
    (root / "sub").mkdir(parents=True)
    (root / "a.txt").write_text("The Arlen lighthouse has ninety steps. " * 5, encoding="utf-8")
    (root / "sub" / "b.txt").write_text("The harbour guild built it in 1850. " * 5, encoding="utf-8")
    (root / "sub" / "up").symlink_to(root, target_is_directory=True)  # a loop through a folder
    (root / "x.txt").symlink_to(root / "y.txt")
    (root / "y.txt").symlink_to(root / "x.txt")  # a loop between two file links
    report = load_corpus([str(root)], CorpusConfig())
    assert sorted(Path(d.source).relative_to(root).as_posix() for d in report.documents) == ["a.txt", "sub/b.txt"]
    kinds = dict(report.skip_kinds)
    assert kinds == {"symlink-loop": 1, "broken-link": 2}
    assert any("already read" in why for _, why in report.skipped)
