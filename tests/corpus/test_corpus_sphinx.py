"""Sphinx sources load as their readers see the built docs: roles as shown, includes inlined, autodoc counted."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ragrade.cli.main import main
from ragrade.corpus.formats import read_markdown, read_rst
from ragrade.corpus.load import LoadReport, load_corpus
from ragrade.corpus.roles import role_text
from ragrade.corpus.rst_include import cut

# written for these tests: the Sphinx docs of an imaginary "heron" HTTP client, in repo/docs/
INDEX = """\
Heron
=====

Heron sends requests.

.. toctree::
   :maxdepth: 2

   api
   changes
   license
   roles
"""

ROLES = """\
.. _roles-page:

Cross references
================

Make a :class:`.Request` and send it with :func:`~heron.client.send`; :meth:`heron.Client.close`
ends the session. :class:`the Request object <heron.Request>` holds headers, :func:`!heron.raw`
is not linked, :py:class:`~heron.Session`, :py:func:`.get`, :c:func:`heron_init` and
:cpp:class:`~heron::Pool` are domain roles; :attr:`~.Request.timeout` is a field.

See :ref:`the options <opt-label>`, :doc:`the API <api>`, :ref:`opt-label`, :ref:`nowhere-label`
and :doc:`changes`. Files stay verbatim: :file:`.heronrc` and :file:`~/.heron/cache`.

.. _opt-label:

Options
-------

A :ref:`roles-page` link back.
"""

CHANGES = """\
Changelog
=========

Version 2.0
-----------

- The unique marker CHANGELOG-ENTRY-7Q.

.. include:: ../docs/_fragments/credits.rst
"""

CREDITS = "Thanks to CREDITS-LINE-4K for the help.\n"

CHANGES_PAGE = """\
Changes
=======

.. include:: ../CHANGES.rst

.. include:: missing/NOTES.rst

After the includes.
"""

EXAMPLE_PY = """\
import heron


def main():
    client = heron.Client()
    return client.send(heron.Request("GET", "/"))


if __name__ == "__main__":
    main()
"""

LICENSE_PAGE = """\
License
=======

.. literalinclude:: ../LICENSE.txt

The example program:

.. literalinclude:: /_static/example.py
   :language: python
   :lines: 4-6
   :caption: example.py
   :emphasize-lines: 2

.. literalinclude:: ../LICENSE.txt
   :start-after: NO-SUCH-MARKER
"""

API_PAGE = """\
API
===

The client API.

.. automodule:: heron
   :members:

.. autoclass:: heron.Client
   :members: send, close

   Clients are cheap to create; text written here is kept.

.. autofunction:: heron.send

Closing words stay.
"""


@pytest.fixture
def sphinx_repo(tmp_path: Path) -> Path:
    """repo/{CHANGES.rst, LICENSE.txt, docs/...}: a Sphinx source tree in docs/ including files above it."""
    repo = tmp_path / "repo"
    docs = repo / "docs"
    for sub in ("_fragments", "_static"):
        (docs / sub).mkdir(parents=True)
    (repo / "CHANGES.rst").write_text(CHANGES, encoding="utf-8")
    (repo / "LICENSE.txt").write_text("Heron License\n\nPermission is granted to LICENSE-TERMS-9Z.\n", "utf-8")
    (docs / "_fragments" / "credits.rst").write_text(CREDITS, encoding="utf-8")
    (docs / "_static" / "example.py").write_text(EXAMPLE_PY, encoding="utf-8")
    pages = {"index": INDEX, "roles": ROLES, "changes": CHANGES_PAGE, "license": LICENSE_PAGE, "api": API_PAGE}
    for name, text in pages.items():
        (docs / f"{name}.rst").write_text(text, encoding="utf-8")
    return repo


def _load(repo: Path) -> tuple[LoadReport, dict[str, str]]:
    report = load_corpus([repo / "docs"])
    return report, {str(d.metadata["path"]): d.text for d in report.documents}


def test_roles_show_what_the_built_docs_show(sphinx_repo: Path) -> None:
    text = _load(sphinx_repo)[1]["roles.rst"]
    assert "Make a `Request` and send it with `send`; `heron.Client.close`\nends the session." in text
    assert "`the Request object` holds headers, `heron.raw`\nis not linked" in text
    assert "`Session`, `get`, `heron_init` and\n`Pool` are domain roles; `timeout` is a field." in text
    # titles shown; a label of a section of the page shows its title; an unknown label stays itself
    assert "See the options, the API, Options, nowhere-label\nand changes." in text
    assert "A Cross references link back." in text
    assert "Files stay verbatim: `.heronrc` and `~/.heron/cache`." in text
    assert not re.search(r":[\w:]+:`", text)  # no role syntax
    assert not re.search(r"`[.~!]", text.replace("`.heronrc`", "").replace("`~/.heron/cache`", ""))


@pytest.mark.parametrize(
    ("name", "content", "shown"),
    [
        ("class", ".Request", "Request"),
        ("func", "~pkg.mod.func", "func"),
        ("meth", "pkg.Class.meth", "pkg.Class.meth"),
        ("ref", "Title <label>", "Title"),
        ("doc", "text <path/to/page>", "text"),
        ("ref", "label", "label"),
        ("class", "the Request <pkg.Request>", "the Request"),
        ("func", "!pkg.raw", "pkg.raw"),
        ("py:class", "~.pkg.Session", "Session"),
        ("py:func", ".pkg.get", "pkg.get"),
        ("c:func", "heron_init", "heron_init"),
        ("cpp:class", "~ns::Pool", "Pool"),
        ("any", ".thing", "thing"),
        ("file", "~/.config", "~/.config"),
        ("samp", "print <x>", "print <x>"),
        ("abbr", "LIFO (last-in, first-out)", "LIFO"),
    ],
)
def test_role_text(name: str, content: str, shown: str) -> None:
    assert role_text(name, content) == shown


def test_myst_roles_share_the_reduction() -> None:
    page = read_markdown("# T\n\nA {py:class}`.Request` and {func}`~pkg.mod.func` and {class}`!pkg.X`.\n")
    assert page.text == "# T\n\nA `Request` and `func` and `pkg.X`."


def test_includes_are_inlined_and_a_missing_one_is_warned(sphinx_repo: Path) -> None:
    report, texts = _load(sphinx_repo)
    changes = texts["changes.rst"]
    assert changes.count("CHANGELOG-ENTRY-7Q") == 1  # ../CHANGES.rst, outside the docs folder
    assert changes.count("CREDITS-LINE-4K") == 1  # included by the included file, relative to the page's folder
    # the included file's "=" title is at the page title's level, as docutils and Sphinx place it
    assert changes.startswith("# Changes\n\n# Changelog\n\n## Version 2.0\n\n- The unique marker")
    assert changes.endswith("After the includes.")
    missing = [note for where, note in report.warnings if where.endswith("changes.rst") and "NOTES.rst" in note]
    assert missing == ["include file not found, left out: missing/NOTES.rst"]
    assert report.summary()["warnings"] == len(report.warnings) == 2  # the missing include, the unmatched cut


def test_literalinclude_is_one_code_block(sphinx_repo: Path) -> None:
    report, texts = _load(sphinx_repo)
    text = texts["license.rst"]
    whole = "```\nHeron License\n\nPermission is granted to LICENSE-TERMS-9Z.\n```"
    assert text.count(whole) == 1  # the whole file, once: the second one's cut matched nothing
    picked = "example.py\n\n```python\ndef main():\n    client = heron.Client()\n    return client.send"
    assert picked in text  # /_static is the docs root's; :lines: 4-6, :caption: above, :language: python
    assert 'return client.send(heron.Request("GET", "/"))\n```' in text and "__main__" not in text
    cut_note = [note for where, note in report.warnings if where.endswith("license.rst")]
    assert len(cut_note) == 1 and "start-after: text not found: 'NO-SUCH-MARKER'" in cut_note[0]


def test_autodoc_is_left_out_and_counted(sphinx_repo: Path) -> None:
    report, texts = _load(sphinx_repo)
    api = texts["api.rst"]
    assert api == (
        "# API\n\nThe client API.\n\n`heron.Client`\n\nClients are cheap to create; text written here is kept."
        "\n\nClosing words stay."
    )
    assert report.left_out == {"autodoc": 3} and report.summary()["left_out"] == {"autodoc": 3}
    assert "members" not in api and "automodule" not in api


def test_index_keeps_its_text_without_the_toctree(sphinx_repo: Path) -> None:
    texts = _load(sphinx_repo)[1]
    assert texts["index.rst"] == "# Heron\n\nHeron sends requests."
    assert {"index.rst", "roles.rst", "changes.rst", "license.rst", "api.rst"} <= set(texts)


def test_cli_prints_the_autodoc_count_and_the_warnings(
    sphinx_repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["corpus", str(sphinx_repo / "docs"), "--out", str(tmp_path / "docs.jsonl")]) == 0
    cap = capsys.readouterr()
    assert "left out 3 autodoc directives (they need the package imported)" in cap.out
    assert "include file not found, left out: missing/NOTES.rst" in cap.err


def test_include_cycles_and_depth_are_guarded(tmp_path: Path) -> None:
    (tmp_path / "a.rst").write_text("A-TEXT\n\n.. include:: b.rst\n", encoding="utf-8")
    (tmp_path / "b.rst").write_text("B-TEXT\n\n.. include:: a.rst\n", encoding="utf-8")
    page = read_rst((tmp_path / "a.rst").read_text(encoding="utf-8"), tmp_path / "a.rst")
    assert page.text == "A-TEXT\n\nB-TEXT"
    assert page.warnings == ["include cycle, left out: a.rst -> b.rst -> a.rst"]


def test_same_file_included_twice_and_options_of_include(tmp_path: Path) -> None:
    (tmp_path / "part.rst").write_text("head\n\n.. start\n\nMIDDLE-PART\n\n.. end\n\ntail\n", encoding="utf-8")
    (tmp_path / "readme.md").write_text("# Read me\n\nSome **Markdown**.\n", encoding="utf-8")
    page_text = (
        ".. include:: part.rst\n   :start-after: .. start\n   :end-before: .. end\n\n"
        ".. include:: part.rst\n   :start-after: .. start\n   :end-before: .. end\n\n"
        ".. include:: part.rst\n   :literal:\n   :start-line: 4\n   :end-line: 5\n\n"
        ".. include:: readme.md\n   :parser: myst_parser.sphinx_\n"
    )
    page = read_rst(page_text, tmp_path / "page.rst")
    assert page.text == "MIDDLE-PART\n\nMIDDLE-PART\n\n```\nMIDDLE-PART\n```\n\n# Read me\n\nSome Markdown."
    assert page.warnings == []


def test_text_without_a_file_warns_about_its_includes() -> None:
    page = read_rst("Text.\n\n.. include:: other.rst\n\n.. literalinclude:: code.py\n")
    assert page.text == "Text."
    assert page.warnings == [
        "include file not found, left out: other.rst",
        "literalinclude file not found, left out: code.py",
    ]


def test_cut_options() -> None:
    text = "\n".join(f"line {i}" for i in range(1, 11))
    assert cut(text, {"lines": "2,4-5,9-"}) == ["line 2", "line 4", "line 5", "line 9", "line 10"]
    assert cut(text, {"start-at": "line 3", "end-before": "line 5"}) == ["line 3", "line 4"]
    assert cut("  a\n    b\n", {"dedent": None}) == ["a", "  b"]
    assert cut("    a\n      b\n", {"dedent": "2"}) == ["  a", "    b"]
    assert cut("@deco\ndef f():\n    pass\n\nclass C:\n    def m(self):\n        return 1\n", {"pyobject": "C.m"}) == [
        "    def m(self):",
        "        return 1",
    ]
    with pytest.raises(ValueError, match="out of range"):
        cut(text, {"lines": "40-50"})


def test_nested_include_falls_back_to_the_including_files_folder(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "parts").mkdir()
    (tmp_path / "parts" / "outer.rst").write_text("OUTER\n\n.. include:: inner.rst\n", encoding="utf-8")
    (tmp_path / "parts" / "inner.rst").write_text("INNER\n", encoding="utf-8")
    page = read_rst(".. include:: ../parts/outer.rst\n", tmp_path / "docs" / "page.rst")
    assert page.text == "OUTER\n\nINNER" and page.warnings == []
