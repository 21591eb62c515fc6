"""What authors write on documentation sites and the built pages do not show: attribute lists, icons,
footnotes, definition lists, inlinehilite prefixes (MkDocs); project-wide :ref: titles, |release|, sidebars,
autodoc docstrings (Sphinx); schema files and missing auto_append files (the load report)."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

from ragrade.cli.main import main
from ragrade.corpus.chunk import create_chunker
from ragrade.corpus.load import CorpusConfig, LoadReport, load_corpus
from ragrade.corpus.markdown import markdown_to_text
from ragrade.corpus.types import Document

SITES = Path(__file__).resolve().parents[1] / "data" / "docsites"


def _path(value: object) -> list[object]:
    assert isinstance(value, list)
    return value


def _docs(report: LoadReport) -> dict[str, Document]:
    return {str(d.metadata["path"]): d for d in report.documents}


@pytest.fixture(scope="module")
def options() -> Document:
    return _docs(load_corpus([SITES / "tern" / "docs"]))["guide/options.md"]


@pytest.fixture(scope="module")
def heron() -> dict[str, Document]:
    return _docs(load_corpus([SITES / "heron" / "docs"]))


def test_attribute_lists_go_from_text_and_headings(options: Document) -> None:
    text = options.text
    assert "{" not in text and "}" not in text
    assert "# Queue options\n" in text and "## Retry policy\n" in text and "## Options\n" in text
    assert "what each one does.\n" in text  # the paragraph's own last line ``{: .lead }`` is gone
    assert "Read the worker guide\n" in text  # a link's ``{ .md-button }``
    chunks = create_chunker("recursive", size=40, overlap=0).chunk(options)
    paths = {" > ".join(str(h) for h in _path(c.metadata["heading_path"])) for c in chunks}
    assert "Queue options > Retry policy" in paths and not any("{" in p for p in paths)


def test_icons_go_and_a_cell_of_icons_says_its_name(options: Document) -> None:
    text = options.text
    assert ":material-" not in text and ":octicons-" not in text and ":fontawesome-" not in text
    assert "Retries wait longer each time and never overlap." in text  # the icon and its attributes
    assert "2. Start the workers." in text  # no space left before the full stop
    assert "`max_retries` | check | kept across restarts" in text
    assert "`visibility_timeout` | close | reset at start" in text  # an icon beside words: removed


def test_footnotes_follow_the_block_that_cites_them(options: Document) -> None:
    text = options.text
    assert "[^" not in text
    cite = text.index("retried three times before it moves")
    note = text.index("The number of retries is set by `max_retries`; zero turns retries off.")
    assert cite < note < text.index("## Options")  # in the section, after its paragraph
    assert text.count("The number of retries is set by") == 1
    assert text.rstrip().endswith("The asyncio client needs Python 3.11 or later.")  # cited in the last tab


def test_definition_lists_read_term_colon_definition(options: Document) -> None:
    text = options.text
    assert "`max_retries`: How many times a failed job runs again before it is given up." in text
    assert "`visibility_timeout`: Seconds a job stays hidden" in text
    assert "Long jobs\nA job that runs longer" in text  # the admonition in the definition
    assert "\n:   " not in text and "!!!" not in text and "???" not in text


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("Term 1\nTerm 2\n:   Shared definition.\n", "Term 1, Term 2: Shared definition."),
        ("`flag`\n\n:   Set apart by a blank line.\n", "`flag`: Set apart by a blank line."),
        ("- item\n\n    `depth`\n    :   Nested in a list.\n", "- item\n  `depth`: Nested in a list."),
        ("- item\n\n    A\n    B\n    :   Both, in a list.\n", "- item\n  A, B: Both, in a list."),
        ("Text.\nTerm\n:   After text.\n", "Text., Term: After text."),  # Python-Markdown: both lines are terms
        ("T1\nT2\n:   !!! note\n        Inside.\n", "T1, T2:\nNote\nInside."),  # an admonition as definition
    ],
)
def test_definition_list_forms(source: str, expected: str) -> None:
    assert markdown_to_text(source)[0] == expected


def test_inlinehilite_prefixes_go(options: Document) -> None:
    assert "Call `queue.put(job)` to add a job and `queue.size()` to count them." in options.text


def test_plain_emoji_only_where_the_site_enables_them(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "index.md").write_text("# Home\n\nShip it :rocket: today, at 10:30:00.\n", encoding="utf-8")
    (tmp_path / "mkdocs.yml").write_text("site_name: X\n", encoding="utf-8")
    assert ":rocket:" in load_corpus([tmp_path / "docs"]).documents[0].text  # shown as written without emoji
    (tmp_path / "mkdocs.yml").write_text("site_name: X\nmarkdown_extensions:\n  - pymdownx.emoji\n", encoding="utf-8")
    text = load_corpus([tmp_path / "docs"]).documents[0].text
    assert "Ship it today, at 10:30:00." in text


def test_ref_shows_the_title_of_a_section_on_another_page(heron: dict[str, Document]) -> None:
    text = heron["retries.rst"].text
    assert "back-off described in Waiting between tries." in text  # the same page
    assert "The session options are listed under\nSessions," in text  # a label in start.rst
    assert "the quickstart shows a first request" in text  # an explicit title wins
    assert "The whole flow is in Quickstart." in text  # :doc: shows the page's own title
    assert "session-options" not in text and "backoff" not in text


def test_release_and_version_come_from_conf_py(heron: dict[str, Document]) -> None:
    text = heron["retries.rst"].text
    assert "Heron 2.4.1 retries a request" in text and "version 2.4 added" in text
    assert "|" not in text


def test_release_computed_in_conf_py_is_said(tmp_path: Path) -> None:
    (tmp_path / "conf.py").write_text("import heron\nrelease = heron.__version__\n", encoding="utf-8")
    (tmp_path / "index.rst").write_text("Home\n====\n\nThis is |release|.\n", encoding="utf-8")
    report = load_corpus([tmp_path])
    assert any("|release| left as written" in note for _, note in report.warnings)


def test_rst_epilog_substitutions_reach_every_page(tmp_path: Path) -> None:
    (tmp_path / "conf.py").write_text(
        'rst_epilog = """\n.. |tool| replace:: Heron CLI\n"""\nrelease = "1.0"\n', encoding="utf-8"
    )
    (tmp_path / "a.rst").write_text("A\n=\n\nRun |tool| |release|.\n", encoding="utf-8")
    assert "Run Heron CLI 1.0." in load_corpus([tmp_path]).documents[0].text


def test_a_sidebar_title_is_not_the_page_title(heron: dict[str, Document]) -> None:
    index = heron["index.rst"]
    assert index.metadata["title"] == "Heron"
    assert "# Upcoming releases" not in index.text and "Upcoming releases" in index.text
    chunks = create_chunker("recursive", size=200, overlap=0).chunk(index)
    assert all("Upcoming releases" not in str(c.metadata["heading_path"]) for c in chunks)


def test_myst_ref_resolves_across_pages(tmp_path: Path) -> None:
    (tmp_path / "conf.py").write_text("", encoding="utf-8")
    (tmp_path / "a.md").write_text("# A\n\n(tuning)=\n## Tuning the pool\n\nText.\n", encoding="utf-8")
    (tmp_path / "b.md").write_text("# B\n\nSee {ref}`tuning`.\n", encoding="utf-8")
    assert "See Tuning the pool." in _docs(load_corpus([tmp_path]))["b.md"].text


_DOCSTRING_MODULE = '''
"""A package written for this test."""


def approx(expected, rel=None):
    """Compare numbers within a tolerance.

    Use it with :func:`pytest.raises` and read :ref:`floats`.

    .. versionadded:: 3.0

    Parameters
    ----------
    expected : float
        The value wanted.
    """
    return expected
'''


def test_api_docstrings_are_read_as_rest_with_one_heading(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "pkg51").mkdir()
    (tmp_path / "pkg51" / "__init__.py").write_text(_DOCSTRING_MODULE, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "ref.rst").write_text(
        textwrap.dedent("""\
        Reference
        =========

        .. _floats:

        pkg51.approx
        ------------

        .. autofunction:: pkg51.approx
        """),
        encoding="utf-8",
    )
    try:
        text = load_corpus([docs], CorpusConfig(api_docstrings=True)).documents[0].text
    finally:
        sys.modules.pop("pkg51", None)
    assert text.count("pkg51.approx") == 2 and "## pkg51.approx\n" in text  # the heading once (and a ref)
    assert "Use it with `pytest.raises` and read pkg51.approx." in text
    assert ":func:" not in text and ":ref:" not in text and ".. versionadded" not in text
    assert "Added in version 3.0" in text
    assert "### Parameters" in text  # the docstring's section below the object's
    assert "expected (float): The value wanted." in text


def test_schema_files_are_one_line_not_one_per_record(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "mkdocs.yml").write_text(
        "site_name: S\nmarkdown_extensions:\n  - pymdownx.snippets:\n      auto_append:\n        - includes/abbr.md\n",
        encoding="utf-8",
    )
    schema = tmp_path / "docs" / "schema"
    schema.mkdir(parents=True)
    (tmp_path / "docs" / "index.md").write_text("# Home\n\nThe HTML pages.\n", encoding="utf-8")
    record = {"$schema": "https://json-schema.org/draft-07/schema", "type": "object", "anyOf": [{"a": 1}, {"b": 2}]}
    for i in range(1000):
        (schema / f"s{i}.json").write_text(json.dumps(record), encoding="utf-8")
    (schema / "colors.json").write_text('[{"name": "red"}, {"name": "blue"}]', encoding="utf-8")
    assert main(["corpus", str(tmp_path / "docs"), "--out", str(tmp_path / "d.jsonl")]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) <= 5
    assert any("skipped 1,001 (not-documents)" in line for line in err)
    assert sum("auto_append file not found" in line and "includes/abbr.md" in line for line in err) == 1


def test_auto_append_files_are_added_and_abbreviations_dropped(tmp_path: Path) -> None:
    (tmp_path / "mkdocs.yml").write_text(
        "site_name: S\nmarkdown_extensions:\n  - abbr\n  - pymdownx.snippets:\n      auto_append:\n"
        "        - includes/abbr.md\n        - includes/footer.md\n",
        encoding="utf-8",
    )
    (tmp_path / "includes").mkdir()
    (tmp_path / "includes" / "abbr.md").write_text("*[HTML]: Hyper Text Markup Language\n", encoding="utf-8")
    (tmp_path / "includes" / "footer.md").write_text("Questions go to the forum.\n", encoding="utf-8")
    (tmp_path / "docs").mkdir()
    for name in ("a", "b"):
        (tmp_path / "docs" / f"{name}.md").write_text(f"# {name}\n\nThe HTML pages.\n", encoding="utf-8")
    report = load_corpus([tmp_path / "docs"])
    assert not report.warnings
    for doc in report.documents:
        assert doc.text.endswith("The HTML pages.\n\nQuestions go to the forum.") and "*[" not in doc.text


def test_mkdocstrings_under_a_heading_naming_the_object_has_one_heading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "pkg51md").mkdir()
    (tmp_path / "pkg51md" / "__init__.py").write_text(
        'class Nest:\n    """A nest holds eggs."""\n\n    def lay(self) -> int:\n        """Lay one egg."""\n'
        "        return 1\n",
        encoding="utf-8",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "api.md").write_text("# API\n\n## pkg51md.Nest\n\n::: pkg51md.Nest\n", encoding="utf-8")
    try:
        text = load_corpus([docs], CorpusConfig(api_docstrings=True)).documents[0].text
    finally:
        sys.modules.pop("pkg51md", None)
    assert text.count("pkg51md.Nest") == 1 and "## pkg51md.Nest\n\n```python\nclass Nest()" in text
    assert "### lay\n" in text  # its members one level below the page's heading


def test_rst_definition_lists_read_term_colon_definition() -> None:
    from ragrade.corpus.rst import rst_to_text

    text = rst_to_text("Args:\n    x: The x value.\n\nretries (int)\n   How often to try again.\n")[0]
    assert text == "Args:\nx: The x value.\n\nretries (int): How often to try again."
