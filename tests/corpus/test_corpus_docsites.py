"""Whole documentation sites (tests/data/docsites): nav/toctree titles, snippets, ``:::`` pages, macros, templates."""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

import pytest

from ragrade.cli.main import main
from ragrade.corpus.chunk import create_chunker
from ragrade.corpus.formats import read_markdown
from ragrade.corpus.load import CorpusConfig, LoadReport, load_corpus
from ragrade.corpus.mkdocs import drop_macros
from ragrade.corpus.site import PageContext, Site, discover_site, toctree_entries
from ragrade.corpus.structure import heading_title
from ragrade.corpus.types import Document

SITES = Path(__file__).resolve().parents[1] / "data" / "docsites"


def _docs(report: LoadReport) -> dict[str, Document]:
    return {str(d.metadata["path"]): d for d in report.documents}


@pytest.fixture(scope="module")
def tern() -> LoadReport:
    return load_corpus([SITES / "tern" / "docs"])


@pytest.fixture(scope="module")
def heron() -> LoadReport:
    return load_corpus([SITES / "heron" / "docs"])


def _heading_path(doc: Document, words: str) -> list[str]:
    chunks = create_chunker("recursive", size=40, overlap=0).chunk(doc)
    chunk = next(c for c in chunks if words in c.text)
    path = chunk.metadata["heading_path"]
    assert isinstance(path, list)
    return [str(p) for p in path]


def test_titles_follow_front_matter_then_nav_then_headings_then_file_name(tern: LoadReport) -> None:
    titles = {rel: doc.metadata["title"] for rel, doc in _docs(tern).items()}
    assert titles == {
        "index.md": "Home",  # nav label over its "# Tern"
        "install.md": "Installing Tern",  # front matter over the nav label "Installing"
        "errors.md": "Validation errors",  # nav label; the page has only `##` sections
        "guide/queue.md": "Queues",  # a bare nav entry: the page's `#`
        "guide/workers.md": "Worker pools",  # nav label (also its lone top heading)
        "guide/scheduling.md": "scheduling",  # no nav label, a `##` after the opening text: the file name
        "reference/client.md": "Client module",
        "changelog.md": "Changelog",
        "guide/options.md": "Queue options",  # nav label (also its `#`, attribute list dropped)
    }


def test_heading_paths_follow_the_title(tern: LoadReport, heron: LoadReport) -> None:
    errors = _docs(tern)["errors.md"]
    assert _heading_path(errors, "were not a tuple") == ["Validation errors", "arguments_type"]
    assert _heading_path(errors, "received another kind") == ["Validation errors", "frozen_set_type"]
    assert _heading_path(errors, "raises a validation error") == ["Validation errors"]
    start = _docs(heron)["start.rst"]
    assert _heading_path(start, "reuses connections") == ["Getting started", "Quickstart", "Sessions"]


def test_toctree_titles(heron: LoadReport) -> None:
    titles = {rel: doc.metadata["title"] for rel, doc in _docs(heron).items()}
    assert titles == {
        "index.rst": "Heron",  # its first section, not the sidebar before it
        "start.rst": "Getting started",  # `Getting started <start>` over its "Quickstart"
        "changes.rst": "Release notes",  # the page is an include of CHANGES.rst
        "license.rst": "License",
        "retries.rst": "Retrying requests",  # a bare toctree entry: the page's first section
    }
    rst = ".. toctree::\n   :maxdepth: 1\n\n   Intro <intro>\n   plain\n   Web <https://x.org>\n   /abs/page\n\nAfter."
    assert toctree_entries(rst + "\n") == [("Intro", "intro")]
    myst = "```{toctree}\n:caption: Parts\nPart one <one.md>\nself\n```\n"
    assert toctree_entries(myst) == [("Part one", "one.md")]


@pytest.mark.parametrize(
    ("text", "title"),
    [
        ("## Only\n\nText.\n\n### Sub\n\nMore.", "Only"),  # a lone top heading heads the page
        ("## One\n\nText.\n\n## Two\n\nMore.", ""),  # sibling sections: neither titles the page
        ("Opening text.\n\n## Part\n\nMore.", ""),  # text before the heading
        ("## Intro\n\nText.\n\n# Real title\n\nMore.", "Real title"),
        ("```\n# not a heading\n```\n\n## Part", ""),
    ],
)
def test_heading_title(text: str, title: str) -> None:
    assert heading_title(text) == title


def test_snippets_are_inlined_from_the_project_root(tern: LoadReport) -> None:
    docs = _docs(tern)
    install = docs["install.md"].text
    assert '```bash\npython -m pip install "tern>=2.4"\ntern --version\n```' in install  # inside a tab's fence
    queue = docs["guide/queue.md"].text
    section = "A queue refuses new jobs once its limit is reached and raises `QueueFull`."
    assert f"{section}\nThe default limit is one thousand jobs." in queue  # a section, then lines 3-4
    assert "Limits can be changed" not in queue and "[start:limits]" not in queue
    assert docs["changelog.md"].text.startswith("# Changelog\n\n## 2.4")
    assert ("changelog.md", "snippet file not found, left out: RELEASING.md (in changelog.md)") in [
        (Path(w).name, n) for w, n in tern.warnings
    ]
    assert all("8<" not in d.text for d in tern.documents)


def _page(root: Path, text: str, name: str = "page.md") -> Path:
    page = root / "docs" / name
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text(textwrap.dedent(text), encoding="utf-8")
    return page


def test_snippet_forms_escapes_cycles_and_bases(tmp_path: Path) -> None:
    (tmp_path / "parts").mkdir()
    (tmp_path / "parts" / "a.md").write_text('A-TEXT\n--8<-- "parts/b.md"\n', encoding="utf-8")
    (tmp_path / "parts" / "b.md").write_text('B-TEXT\n--8<-- "parts/a.md"\n', encoding="utf-8")
    (tmp_path / "parts" / "code.py").write_text("x = 1\ny = 2\nz = 3\n", encoding="utf-8")
    (tmp_path.parent / "outside.md").write_text("OUTSIDE\n", encoding="utf-8")
    page = _page(
        tmp_path,
        """\
        # Page

        --8<--
        parts/a.md
        ; a comment
        --8<--

        ```python
            --8<-- "parts/code.py:2:3"
        ```

        ;--8<-- "parts/a.md"

        --8<-- "../outside.md"
        --8<-- "https://example.org/remote.md"
        """,
    )
    (tmp_path / "mkdocs.yml").write_text("site_name: T\n", encoding="utf-8")
    ctx = PageContext(page=page, site=discover_site(tmp_path / "docs"))
    text = read_markdown(page.read_text(encoding="utf-8"), ctx).text
    assert text.startswith("# Page\n\nA-TEXT\nB-TEXT\n\n```python\n    y = 2\n    z = 3\n```")
    assert '--8<-- "parts/a.md"' in text  # the escaped marker, shown without its ";"
    assert "OUTSIDE" not in text and "remote" not in text
    warned = " | ".join(ctx.warnings)
    assert "snippet cycle, left out: page.md -> a.md -> b.md -> a.md" in warned
    assert "snippet file not found, left out: ../outside.md" in warned  # outside the base path
    assert "remote snippets are not fetched" in warned


def test_snippets_without_mkdocs_yml_use_the_loaded_folder_and_its_parent(tmp_path: Path) -> None:
    (tmp_path / "shared.md").write_text("SHARED TEXT\n", encoding="utf-8")
    _page(tmp_path, '# P\n\n--8<-- "shared.md"\n--8<-- "docs/local.md"\n')
    (tmp_path / "docs" / "local.md").write_text("# Local\n\nLOCAL TEXT\n", encoding="utf-8")
    report = load_corpus([tmp_path / "docs"])
    page = _docs(report)["page.md"].text
    assert page == "# P\n\nSHARED TEXT\n\n# Local\n\nLOCAL TEXT"  # the parent (project), then the folder
    assert not report.warnings


def test_api_pages_and_mkdocstrings_blocks_are_counted(tern: LoadReport) -> None:
    docs = _docs(tern)
    assert "reference/api.md" not in docs  # a heading and `:::` blocks only: a generated API page
    client = docs["reference/client.md"].text
    assert client == (
        "# The client module\n\nThe client module talks to a queue over the network; its functions retry on "
        "connection errors.\n\nEvery call takes a `timeout` in seconds."
    )
    summary = tern.summary()
    assert summary["left_out"]["api-pages"] == 1
    assert summary["left_out"]["mkdocstrings"] == 3
    assert summary["skipped"] == 0  # not skipped as empty


def test_api_docstrings_fill_importable_objects(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = tmp_path / "src" / "kestrel_demo_pkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(
        textwrap.dedent(
            '''\
            """Kestrel demo package."""


            class Nest:
                """A nest holds eggs."""

                def lay(self, n: int = 1) -> int:
                    """Lay ``n`` eggs and return how many the nest holds."""
                    return n

                def _hidden(self) -> None:
                    """Private."""
            '''
        ),
        encoding="utf-8",
    )
    monkeypatch.syspath_prepend(str(tmp_path / "src"))
    _page(
        tmp_path, "# Reference\n\n::: kestrel_demo_pkg.Nest\n    options:\n      heading_level: 2\n\n::: nope_pkg.X\n"
    )
    off = load_corpus([tmp_path / "docs"])
    assert not off.documents and off.summary()["left_out"] == {"api-pages": 1, "mkdocstrings": 2}
    on = load_corpus([tmp_path / "docs"], CorpusConfig(api_docstrings=True))
    text = _docs(on)["page.md"].text
    assert text.startswith(
        "# Reference\n\n## kestrel_demo_pkg.Nest\n\n```python\nclass Nest()\n```\n\nA nest holds eggs."
    )
    assert "### lay\n\n```python\ndef lay(self, n: int = 1) -> int\n```\n\nLay `n` eggs" in text
    assert "_hidden" not in text and "nope_pkg" not in text
    assert on.summary()["left_out"] == {"mkdocstrings": 1}
    assert any("could not be imported, left out: nope_pkg.X" in note for _, note in on.warnings)


def test_autodoc_fill_is_opt_in(tmp_path: Path) -> None:
    (tmp_path / "api.rst").write_text("API\n===\n\n.. autofunction:: textwrap.dedent\n", encoding="utf-8")
    assert load_corpus([tmp_path]).summary()["left_out"] == {"api-pages": 1, "autodoc": 1}
    on = load_corpus([tmp_path], CorpusConfig(api_docstrings=True))
    text = on.documents[0].text
    assert "## textwrap.dedent" in text and "Remove any common leading whitespace" in text  # one below "# API"
    assert "autodoc" not in on.summary()["left_out"]


def test_macros_take_site_values_and_the_rest_is_counted(tern: LoadReport) -> None:
    docs = _docs(tern)
    assert "This documentation covers Tern 2.4." in docs["index.md"].text  # extra.version
    queue = docs["guide/queue.md"].text
    assert "Contact help@tern.example.org when a limit is too small" in queue  # !ENV default
    assert "Usage numbers are collected only when analytics are on." in queue  # the {% if %} body stays
    assert "```jinja\n{{ job.name }} is kept as written inside a raw block.\n```" in queue
    assert tern.summary()["left_out"]["macros"] == 3  # contact_form(), {% if %}, {% endif %}


def test_drop_macros_outside_code_unless_the_plugin_renders_code() -> None:
    text = "A {{ v }} and {{ other }}.\n\n`{{ inline }}`\n\n```\n{{ code }}\n```\n{# c #}\n"
    assert drop_macros(text, {"v": "1"}) == ("A 1 and .\n\n`{{ inline }}`\n\n```\n{{ code }}\n```\n", 1)
    out, n = drop_macros(text, {"v": "1"}, in_code=True)
    assert "{{" not in out and n == 3


def test_templates_and_site_config_are_left_out_and_counted(tern: LoadReport, heron: LoadReport) -> None:
    assert tern.summary()["left_out"]["templates"] == 2  # overrides/main.html, overrides/partials/footer.html
    assert heron.summary()["left_out"]["templates"] == 1  # _templates/layout.html
    assert heron.summary()["left_out"]["site-config"] == 1  # conf.py: not an "unsupported" skip
    assert all(d.metadata["format"] != "html" for d in tern.documents)
    kept = load_corpus([SITES / "tern" / "docs"], CorpusConfig(templates=True))
    assert "templates" not in kept.summary()["left_out"]
    assert [d.metadata["path"] for d in kept.documents if d.metadata["format"] == "html"] == ["overrides/main.html"]
    assert kept.summary()["skipped_by_reason"] == {"empty": 1}  # the footer partial: a <footer> holds no main text


def test_a_saved_web_page_is_not_a_template(tmp_path: Path) -> None:
    (tmp_path / "theme").mkdir()
    (tmp_path / "theme" / "page.html").write_text("<html><body><p>Real text.</p></body></html>", encoding="utf-8")
    (tmp_path / "theme" / "part.html").write_text("<div>{{ nav }}</div>", encoding="utf-8")
    site = Site(root=tmp_path)
    assert not site.is_template(tmp_path / "theme" / "page.html", (tmp_path / "theme" / "page.html").read_bytes())
    assert site.is_template(tmp_path / "theme" / "part.html", b"<div>{{ nav }}</div>")
    report = load_corpus([tmp_path])
    assert [d.text.strip() for d in report.documents] == ["Real text."]


def test_broken_mkdocs_yml_is_one_warning(tmp_path: Path) -> None:
    (tmp_path / "mkdocs.yml").write_text("nav: [unclosed\n", encoding="utf-8")
    _page(tmp_path, "## Only heading\n\nText.\n")
    report = load_corpus([tmp_path / "docs"])
    assert _docs(report)["page.md"].metadata["title"] == "Only heading"
    assert len(report.warnings) == 1 and "not used for page titles and snippets" in report.warnings[0][1]


def test_cli_prints_one_line_per_kind(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    site = tmp_path / "tern"
    shutil.copytree(SITES / "tern", site)
    assert main(["corpus", str(site / "docs"), "--out", str(tmp_path / "docs.jsonl")]) == 0
    cap = capsys.readouterr()
    assert "left out 2 theme templates" in cap.out
    assert "left out 3 mkdocstrings ':::' objects" in cap.out
    assert "left out 1 generated API pages" in cap.out
    assert "left out 3 {{ macro }} / Jinja placeholders" in cap.out
    assert "snippet file not found, left out: RELEASING.md" in cap.err
    assert "Traceback" not in cap.out + cap.err


def test_myst_include_and_literalinclude_are_inlined(tmp_path: Path) -> None:
    (tmp_path / "examples").mkdir()
    (tmp_path / "examples" / "app.py").write_text("def f():\n    return 1\n\n\ndef g():\n    return 2\n")
    (tmp_path / "CHANGES.md").write_text("# Changes\n\n## 1.0\n\nFirst release.\n\n```{include} CHANGES.md\n```\n")
    fence = "`" * 3
    _page(
        tmp_path,
        f"""\
        # Guide

        {fence}{{include}} ../CHANGES.md
        :start-after: "## 1.0"
        {fence}

        {fence}{{literalinclude}} ../examples/app.py
        ---
        language: python
        pyobject: g
        caption:
        ---
        {fence}

        {fence}{{include}} missing.md
        {fence}

        {fence}{{eval-rst}}
        .. autoclass:: nope.X

        .. literalinclude:: ../examples/app.py
           :lines: 1-2
        {fence}
        """,
    )
    report = load_corpus([tmp_path / "docs"])
    text = _docs(report)["page.md"].text
    assert text == (
        "# Guide\n\nFirst release.\n\napp.py\n\n```python\ndef g():\n    return 2\n```\n\n"
        "```\ndef f():\n    return 1\n```"
    )
    notes = [note for _, note in report.warnings]
    assert "include file not found, left out: missing.md (in page.md)" in notes
    assert "include cycle, left out: page.md -> CHANGES.md -> CHANGES.md" in notes  # the file includes itself
    assert report.summary()["left_out"] == {"autodoc": 1}


def test_unimportable_autodoc_objects_are_one_warning_per_page(tmp_path: Path) -> None:
    rst = "API\n===\n\nSome text.\n\n.. autoclass:: nope_pkg.A\n\n.. autofunction:: nope_pkg.b\n"
    (tmp_path / "api.rst").write_text(rst, encoding="utf-8")
    report = load_corpus([tmp_path], CorpusConfig(api_docstrings=True))
    assert [note for _, note in report.warnings] == [
        "2 autodoc object(s) could not be imported, left out: nope_pkg.A, nope_pkg.b"
    ]
    assert report.summary()["left_out"] == {"autodoc": 2}
    assert report.documents[0].text == "# API\n\nSome text."


def test_api_blocks_leave_code_and_colon_fences_alone() -> None:
    from ragrade.corpus.apidoc import api_blocks

    shown = "```markdown\n::: tern.Queue\n    options:\n      members: false\n```"
    assert api_blocks(shown, PageContext()) == (shown, 0)  # documentation of the syntax stays code
    container = "::: warning\nCareful.\n:::"
    assert api_blocks(container, PageContext()) == (container, 0)  # a container closed by ':::'
    tabbed = '=== "API"\n\n    ::: tern.Queue\n        options:\n          show_source: false\n\n    After.'
    ctx = PageContext()
    assert api_blocks(tabbed, ctx) == ('=== "API"\n\n\n    After.', 1)
    assert ctx.left_out == {"mkdocstrings": 1}


def test_toctree_titles_reach_a_subfolder_loaded_alone(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    (docs / "guide").mkdir(parents=True)
    (docs / "conf.py").write_text('project = "P"\n', encoding="utf-8")
    (docs / "index.rst").write_text("P\n=\n\n.. toctree::\n\n   Setting up <guide/setup>\n", encoding="utf-8")
    (docs / "guide" / "setup.rst").write_text("Setup\n=====\n\nInstall it.\n", encoding="utf-8")
    report = load_corpus([docs / "guide"])
    assert [d.metadata["title"] for d in report.documents] == ["Setting up"]


def test_the_command_line_loads_templates_and_docstrings_when_asked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ragrade.cli.main import main

    site = str(SITES / "tern" / "docs")
    assert main(["corpus", site, "--out", str(tmp_path / "a.jsonl")]) == 0
    plain = capsys.readouterr().out
    assert "left out 2 theme templates" in plain and "--templates loads them" in plain
    assert main(["corpus", site, "--out", str(tmp_path / "b.jsonl"), "--templates", "--api-docstrings"]) == 0
    asked = capsys.readouterr().out
    assert "theme templates" not in asked
    docs = [json.loads(line) for line in (tmp_path / "b.jsonl").read_text().splitlines()[1:]]
    assert "overrides/main.html" in [d["metadata"]["path"] for d in docs]
