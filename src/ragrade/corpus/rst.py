"""reStructuredText (docutils, Sphinx extensions included) to structured plain text.

The document is parsed by docutils into a doctree, which is written out with the same conventions
as the Markdown reader (:mod:`ragrade.corpus.markdown`): section titles as ``#`` lines, literal
and code blocks as fenced code with their language, inline literals in backticks, roles as their
text (``:ref:`text <label>``` -> ``text``; code roles such as ``:func:`` as inline code), labels
(``.. _name:``), comments, substitution definitions and navigation directives dropped, admonitions
kept as a title line and their content.

Sphinx roles and directives that docutils does not know are not errors: docutils reports them
(never printed: reports are silenced) and keeps their source, which is turned into text here:
an unknown role's ``:name:`text``` becomes the role's text, an unknown directive becomes its
title (``versionadded``, ``seealso``, ``py:function`` signatures ...) and its content parsed as reST.
Roles show what the built docs show (:func:`ragrade.corpus.roles.role_text`: ``:class:`.Request```
-> ```Request```, ``~`` and ``!`` gone); ``:ref:`label``` shows the title of the section with that
label on any page of the project, ``:doc:`page``` that page's title. ``include`` and ``literalinclude``
are inlined and autodoc directives counted and left out (:mod:`ragrade.corpus.rst_include`). A title that
does not open a section (a sidebar's, a topic's, a table's) is a line of text, never a heading.
"""

from __future__ import annotations

import copy
import io
import re
import textwrap
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from ragrade.corpus.roles import CODE_ROLES, DROP_DIRECTIVES, directive_title, fenced, role_text
from ragrade.corpus.structure import heading_title
from ragrade.io import JSONObject

if TYPE_CHECKING:
    from ragrade.corpus.rst_include import RstContext

_ROLE_RE = re.compile(r"^:(?:([\w.+-]+(?::[\w.+-]+)?):)?`(.*)`(?::([\w.+-]+(?::[\w.+-]+)?):)?_{0,2}$", re.S)
_DIRECTIVE_RE = re.compile(r"^\.\.[ \t]+([\w:.+-]+)::[ \t]*(.*)$")
_OPTION_RE = re.compile(r"^[ \t]+:[\w -]+:")
_OBJECT_DIRECTIVES = frozenset(
    [
        "function",
        "class",
        "method",
        "attribute",
        "data",
        "exception",
        "staticmethod",
        "classmethod",
        "decorator",
        "decoratormethod",
        "property",
        "module",
        "member",
        "macro",
        "type",
        "var",
        "struct",
        "union",
        "enum",
        "enumerator",
        "enum-class",
        "concept",
        "option",
        "envvar",
        "describe",
        "object",
        "program",
        "cmdoption",
        "confval",
        "setting",
        "directive",
        "role",
    ]
)
_CODE_DIRECTIVES = frozenset({"code-block", "sourcecode", "code", "ipython", "jupyter-execute", "testcode"})
_SKIP_NODES = frozenset(
    [
        "comment",
        "target",
        "substitution_definition",
        "system_message",
        "pending",
        "raw",
        "footnote_reference",
        "citation_reference",
        "meta",
        "decoration",
        "header",
        "footer",
        "transition",
    ]
)

_SETTINGS = {
    "report_level": 5,
    "halt_level": 5,
    "warning_stream": False,
    "doctitle_xform": False,
    "sectsubtitle_xform": False,
    "file_insertion_enabled": False,
    "raw_enabled": False,
    "syntax_highlight": "none",
    "input_encoding": "unicode",
    "smart_quotes": False,
    "character_level_inline_markup": False,
}


@lru_cache(maxsize=1)
def _base_settings() -> Any:
    """docutils settings with our overrides, computed once (building them is most of a small file's time)."""
    from docutils.frontend import get_default_settings
    from docutils.parsers.rst import Parser
    from docutils.readers.standalone import Reader

    settings = get_default_settings(Parser, Reader)
    for key, value in _SETTINGS.items():
        setattr(settings, key, value)
    return settings


def _doctree(text: str, ctx: RstContext) -> Any:
    try:
        from docutils.core import publish_doctree
        from docutils.utils import SystemMessage

        from ragrade.corpus.rst_include import file_directives
    except ImportError as exc:  # pragma: no cover - base dependency
        from ragrade.errors import ConfigError

        raise ConfigError("reading reStructuredText needs docutils: pip install docutils") from exc
    settings = copy.copy(_base_settings())
    settings.warning_stream = io.StringIO()
    settings.ragrade_context = ctx
    try:
        with file_directives():
            return publish_doctree(text, source_path=ctx.source, settings=settings)
    except (SystemMessage, ValueError, IndexError, AttributeError, TypeError) as exc:
        from ragrade.corpus.types import Skip

        raise Skip("unreadable", f"unreadable reStructuredText ({type(exc).__name__}: {exc})") from exc


class _Writer:
    def __init__(self, ctx: RstContext) -> None:
        self.ctx = ctx

    def collect_labels(self, tree: Any) -> None:
        """Explicit labels (``.. _name:``) of the page's sections, for ``:ref:`name``` to show the title."""
        explicit = getattr(tree, "nametypes", {})
        for section in tree.findall(lambda n: getattr(n, "tagname", "") == "section"):
            if not section.children or section.children[0].tagname != "title":
                continue
            title = " ".join(self.inline(section.children[0]).split())
            for name in section.get("names", []):
                if explicit.get(name) and title:
                    self.ctx.labels.setdefault(str(name), title)

    def blocks(self, node: Any, depth: int) -> list[str]:
        """Text blocks of ``node``'s children; ``depth`` is the section nesting."""
        out: list[str] = []
        for child in node.children:
            out.extend(self.block(child, depth))
        return [b for b in out if b.strip()]

    def block(self, node: Any, depth: int) -> list[str]:
        name = node.tagname
        if name in _SKIP_NODES:
            return self.unknown_directive(node) if name == "system_message" else []
        if name == "section":
            return self.blocks(node, depth + 1)
        if name in ("title", "rubric"):
            text = " ".join(self.inline(node).split())
            if text and name == "title" and getattr(node.parent, "tagname", "") in ("section", "document"):
                return [f"{'#' * min(6, max(1, depth))} {text}"]
            return [text]  # a rubric, or the title of a sidebar, topic or table: a line of text, not a section
        if name in ("paragraph", "caption", "attribution", "line", "term", "field_name"):
            return [self.inline(node)]
        if name in ("literal_block", "doctest_block", "math_block"):
            return [self.code(node)]
        if name in ("bullet_list", "enumerated_list"):
            return [self.list_items(node, ordered=name == "enumerated_list")]
        if name == "table":
            return [self.table(node)]
        if name == "definition_list_item":
            return [self.definition(node)]
        if name == "topic" and "contents" in node.get("classes", []):
            return []
        if name in ("image",):
            return [str(node.get("alt", ""))]
        if name == "admonition" or name in _ADMONITIONS:
            head = [] if name == "admonition" else ["See also" if name == "seealso" else name.capitalize()]
            return head + self.blocks(node, depth)
        return self.blocks(node, depth) if node.children and not _is_text(node) else [self.inline(node)]

    def definition(self, node: Any) -> str:
        """A definition list item as "term (classifier): definition" (as the Markdown reader writes them)."""
        term = " ".join(self.inline(c) for c in node.children if c.tagname == "term")
        kinds = [" ".join(self.inline(c).split()) for c in node.children if c.tagname == "classifier"]
        term = " ".join(f"{term} ({', '.join(kinds)})".split()) if kinds else " ".join(term.split())
        body: list[str] = []
        for child in (c for c in node.children if c.tagname == "definition"):
            body.extend(self.blocks(child, 0))
        prose = bool(body) and node.children[-1].children and node.children[-1].children[0].tagname == "paragraph"
        label = term if term.endswith(":") else f"{term}:"  # a Google-style section (``Args:``) keeps one colon
        head = f"{label}{chr(10) if term.endswith(':') else ' '}{body.pop(0)}" if prose else label
        return "\n".join([head, *body])

    def inline(self, node: Any) -> str:
        if _is_text(node):
            return str(node.astext())
        name = node.tagname
        if name in _SKIP_NODES:
            return ""
        if name == "literal":
            return f"`{node.astext()}`"
        if name == "problematic":
            return self.role(node.astext())
        if name in ("math",):
            return str(node.astext())
        if name == "image":
            return str(node.get("alt", ""))
        return "".join(self.inline(c) for c in node.children)

    def code(self, node: Any) -> str:
        classes = [c for c in node.get("classes", []) if c not in ("code", "highlight")]
        lang = str(node.get("language") or (classes[0] if classes else ""))
        if node.tagname == "doctest_block":
            lang = "pycon"
        elif node.tagname == "math_block":
            return str(node.astext())
        return fenced(lang, node.astext())

    def list_items(self, node: Any, *, ordered: bool) -> str:
        items: list[str] = []
        for k, item in enumerate(node.children, start=1):
            body = "\n".join(self.blocks(item, 0))
            marker = f"{k}." if ordered else "-"
            items.append(f"{marker} " + body.replace("\n", "\n" + " " * (len(marker) + 1)))
        return "\n".join(items)

    def table(self, node: Any) -> str:
        rows = []
        for row in node.traverse(lambda n: getattr(n, "tagname", "") == "row"):
            rows.append(" | ".join(" ".join("\n".join(self.blocks(e, 0)).split()) for e in row.children))
        return "\n".join(rows)

    def role(self, raw: str) -> str:
        """The text of an unknown (Sphinx) role's source ``:name:`text```; other problems keep their text.

        ``:ref:`label``` without a title shows the title of the section with that label (any page of the project),
        ``:doc:`page``` the title of that page.
        """
        m = _ROLE_RE.match(raw.strip())
        if m is None:
            return raw
        name = m.group(1) or m.group(3) or ""
        short = name.split(":")[-1]
        text = role_text(name, m.group(2))
        if short == "ref" and not m.group(2).rstrip().endswith(">"):
            text = self.ctx.labels.get(" ".join(text.lower().split()), text)
        elif short == "doc" and not m.group(2).rstrip().endswith(">"):
            text = self.doc_title(m.group(2).strip()) or text
        return f"`{text}`" if short in CODE_ROLES and text else text

    def doc_title(self, target: str) -> str | None:
        """The title of the project's page ``target`` (relative to the page; ``/`` from the source root)."""
        base = self.ctx.root if target.startswith("/") else (self.ctx.page.parent if self.ctx.page else None)
        if base is None or not self.ctx.doc_titles:
            return None
        try:
            return self.ctx.doc_titles.get(str((base / target.lstrip("/")).resolve()))
        except (OSError, RuntimeError):
            return None

    def unknown_directive(self, node: Any) -> list[str]:
        """An unknown (Sphinx) directive, from the source docutils kept in its error report."""
        blocks = [c for c in node.children if c.tagname == "literal_block"]
        if not blocks or "directive" not in node.astext():
            return []
        lines = blocks[0].astext().split("\n")
        m = _DIRECTIVE_RE.match(lines[0]) if lines else None
        if m is None:
            return []
        name, arg = m.group(1).lower(), m.group(2).strip()
        short = name.split(":")[-1]
        body_lines = lines[1:]
        while body_lines and _OPTION_RE.match(body_lines[0]):
            body_lines = body_lines[1:]
        body = textwrap.dedent("\n".join(body_lines)).strip("\n")
        if short in DROP_DIRECTIVES or name in DROP_DIRECTIVES:
            return []
        if short in _CODE_DIRECTIVES:
            return [fenced(arg.split()[0] if arg else "", body)]
        inner = rst_to_text(body, self.ctx)[0] if body.strip() else ""
        head = f"`{arg}`" if short in _OBJECT_DIRECTIVES and arg else directive_title(short, arg)
        return [b for b in (head, inner) if b]


_ADMONITIONS = frozenset(
    [
        "attention",
        "caution",
        "danger",
        "error",
        "hint",
        "important",
        "note",
        "tip",
        "warning",
        "seealso",
        "versionmodified",
    ]
)


def _is_text(node: object) -> bool:
    return bool(getattr(node, "tagname", "") == "#text")


def rst_to_text(text: str, context: RstContext | None = None) -> tuple[str, JSONObject]:
    """reST ``text`` as structured text and its metadata (the title: the first section title when it heads the page).

    ``context`` names the file (for its includes) and collects the warnings and the directives left out.
    """
    from ragrade.corpus.rst_include import RstContext

    ctx = context or RstContext()
    if ctx.rst is None:
        ctx.rst = lambda doc: rst_to_text(doc, ctx)[0]
    tree = _doctree(text, ctx)
    writer = _Writer(ctx)
    writer.collect_labels(tree)
    out = "\n\n".join(writer.blocks(tree, 0))
    title = heading_title(out)
    return out, ({"title": title} if title else {})


__all__ = ["rst_to_text"]
