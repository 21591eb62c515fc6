"""Markdown, MyST and reST are parsed: headings stay structure, code stays code, markup goes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ragrade.corpus.formats import FORMATS, read_markdown, read_rst
from ragrade.corpus.load import load_corpus

MYST = """---
title: Tern guide
---
(quickstart)=
# Quickstart { #quick }

% a comment that is not content
Call {func}`tern.start` with a {class}`~tern.core.Queue`; see {ref}`the install page <install>`
and {doc}`guides/setup`. Inline `tern up` stays code.

```{code-block} python
:linenos:
:caption: start.py

def start(limit):
    return limit * 2
```

:::{note} Mind the cache
The cache lives in **~/.tern**, see [the docs][docs].
:::

```{toctree}
:maxdepth: 2

install
usage
```

+++

```{versionadded} 2.1
The `--fast` flag.
```

## Configure

```{eval-rst}
.. note:: Written in reST inside MyST, with :func:`tern.configure`.
```

- one
- two

[docs]: https://example.org/docs
"""

RST = """.. _quickstart:

==========
Quickstart
==========

.. contents::

.. Comment: not content.

Call :func:`tern.start` with a :py:class:`~tern.core.Queue`; see :ref:`the install page <install>`,
:doc:`guides/setup` and :pep:`8`. Inline ``tern up`` stays code, *emphasis* goes.

.. code-block:: python
   :linenos:

   def start(limit):
       return limit * 2

.. versionadded:: 2.1
   The :option:`--fast` flag.

.. toctree::
   :maxdepth: 2

   install

Configure
=========

.. note:: Mind the cache.

.. py:function:: configure(path, *, strict=False)

   Reads the configuration at *path*.

.. tern-special:: custom directive nobody registered

   Its body is still text.

A literal block::

   tern up --fast

.. |project| replace:: Tern

|project| is fast.
"""

# markup that must not survive loading (outside code)
_LEAKS = re.compile(r":[\w:.+-]+:`|\{[\w:.+-]+\}`|^\.\. |^\([\w.-]+\)=|^(?:```+|:::+)\{|^[=\-~]{4,}$|\*\*|\]\[", re.M)


def _outside_code(text: str) -> str:
    return re.sub(r"^```[^\n]*\n.*?^```$", "", text, flags=re.M | re.S)


def test_myst_markdown_is_parsed() -> None:
    page = read_markdown(MYST)
    text = page.text
    assert page.metadata == {"title": "Tern guide", "myst": True}  # front matter first, then the first heading
    assert text.startswith("# Quickstart\n\nCall `tern.start` with a `Queue`; see the install page\nand setup.")
    assert "Inline `tern up` stays code." in text
    assert "```python\ndef start(limit):\n    return limit * 2\n```" in text  # options dropped, language kept
    assert "Note: Mind the cache\n\nThe cache lives in ~/.tern, see the docs." in text
    assert "Added in version 2.1:\n\nThe `--fast` flag." in text
    assert "## Configure\n\nNote\n\nWritten in reST inside MyST, with `tern.configure`." in text
    assert "- one\n- two" in text
    for gone in ("install\nusage", "maxdepth", "comment", "quickstart)", "+++", "{ #quick }", "https://"):
        assert gone not in text, gone
    assert not _LEAKS.search(_outside_code(text)), _LEAKS.findall(_outside_code(text))


def test_markdown_without_myst_is_not_marked_myst() -> None:
    page = read_markdown("# Title\n\nPlain *Markdown* with `code`.\n\n    indented code\n")
    assert page.metadata == {"title": "Title"}
    assert page.text == "# Title\n\nPlain Markdown with `code`.\n\n```\nindented code\n```"


def test_rst_is_parsed_with_sphinx_roles_and_directives(capsys: pytest.CaptureFixture[str]) -> None:
    page = read_rst(RST)
    text = page.text
    assert page.metadata == {"title": "Quickstart"}
    assert text.startswith("# Quickstart\n\nCall `tern.start` with a `Queue`; see the install page,\nsetup and PEP 8.")
    assert "Inline `tern up` stays code, emphasis goes." in text
    assert "```python\ndef start(limit):\n    return limit * 2\n```" in text
    assert "Added in version 2.1:\n\nThe `--fast` flag." in text
    assert "## Configure\n\nNote\n\nMind the cache." in text
    assert "`configure(path, *, strict=False)`\n\nReads the configuration at path." in text
    assert "Tern special: custom directive nobody registered\n\nIts body is still text." in text
    assert "A literal block:\n\n```\ntern up --fast\n```" in text
    assert "Tern is fast." in text
    for gone in ("Comment", "maxdepth", "install\n", "Contents", "quickstart:", "|project|"):
        assert gone not in text, gone
    assert not _LEAKS.search(_outside_code(text)), _LEAKS.findall(_outside_code(text))
    out = capsys.readouterr()
    assert out.out == "" and out.err == ""  # docutils reports are never printed


def test_broken_rst_loads_without_error_text(capsys: pytest.CaptureFixture[str]) -> None:
    broken = "Title\n=====\n\n+-----+\n| bad table\n\n:unknownrole:`x` and `unclosed\n\n.. note::\n"
    page = read_rst(broken)
    assert page.text.startswith("# Title")
    assert "x and" in page.text
    assert "ERROR" not in page.text and "System Message" not in page.text
    assert capsys.readouterr().err == ""


def test_rst_and_myst_files_load_with_their_format(tmp_path: Path) -> None:
    (tmp_path / "guide.rst").write_text(RST, encoding="utf-8")
    (tmp_path / "page.md").write_text(MYST, encoding="utf-8")
    report = load_corpus([tmp_path])
    docs = {d.metadata["path"]: d for d in report.documents}
    assert docs["guide.rst"].metadata["format"] == "rst" and docs["guide.rst"].metadata["title"] == "Quickstart"
    assert docs["page.md"].metadata["format"] == "md" and docs["page.md"].metadata["myst"] is True
    assert report.summary()["by_format"] == {"md": 1, "rst": 1}
    assert "```python\ndef start(limit):\n    return limit * 2\n```" in docs["guide.rst"].text  # indentation kept


def test_readme_lists_every_supported_extension() -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    line = next(ln for ln in readme.splitlines() if ln.startswith("ragrade corpus ./my-docs"))
    for ext in {".txt", ".md", ".rst", ".html", ".json", ".jsonl", ".pdf"}:
        assert ext in FORMATS and ext in line, ext
