"""Sphinx's file directives for the reST reader: ``include`` and ``literalinclude`` inlined, autodoc counted.

``.. include::`` inserts the file's reST where the directive stands (``:literal:`` / ``:code:`` as a
code block, a ``:parser:`` naming MyST or Markdown as Markdown); ``.. literalinclude::`` becomes one
code block in its ``:language:``, cut by ``:pyobject:``, ``:start-after:`` / ``:start-at:``,
``:end-before:`` / ``:end-at:``, ``:lines:`` (Sphinx's ``1,3,5-10,20-``) and ``:dedent:``, with
``:prepend:`` / ``:append:`` lines and its ``:caption:`` above. Paths are resolved as Sphinx does:
relative to the page's folder (then, for a file that an included file includes, to that file's
folder), a leading ``/`` against the docs source root (the top folder of the loaded corpus path),
``<name>`` among docutils' standard includes. A file outside the corpus is read too
(``../CHANGES.rst``: the project's own repository). A missing or unreadable file, a cut that
matches nothing and an include cycle each leave a one-line warning in the context (the load report
shows it), never a silent drop.

Autodoc directives (``.. autoclass::``, ``.. automodule::`` ...) need the package imported to show
anything: they are left out and counted (``left_out["autodoc"]``); text written under one is kept,
under the object's name. With ``api_docstrings`` (opt-in) an object that imports from the current
environment is written from its docstrings instead (:func:`ragrade.corpus.apidoc.object_markdown`), the
docstrings read as reST by the same reader as the pages, one heading per object below the page's
section (none when that section is named after the object).

The directives are installed in docutils' directive table only while the reader parses
(:func:`file_directives`), so docutils keeps its own ``include`` for everyone else.
"""

from __future__ import annotations

import ast
import textwrap
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from docutils import nodes, statemachine
from docutils.parsers.rst import Directive, directives, states

from ragrade.corpus.clean import decode_bytes
from ragrade.corpus.types import Skip

AUTODOC_KIND = "autodoc"
# autodoc and the extensions that import the package to write their text
AUTODOC_DIRECTIVES = frozenset(
    [
        "automodule",
        "autoclass",
        "autoexception",
        "autofunction",
        "automethod",
        "autoattribute",
        "autoproperty",
        "autodata",
        "autodecorator",
        "autonewtypedata",
        "autotypevar",
        "autosummary",
        "autoprogram",
        "autopydantic_model",
        "autopydantic_settings",
    ]
)
_NAMES_ONLY = frozenset({"autosummary", "autoprogram"})  # their content is a list of names, not text
_MAX_DEPTH = 16
_MAX_INCLUDES = 500
_DEFAULT_MAX_BYTES = 64 * 1024 * 1024


@dataclass
class RstContext:
    """What the reST reader knows about the page it reads, and what it found to report.

    ``page``: the file (None for text without a file: relative includes then cannot be found);
    ``root``: the docs source root a leading ``/`` is relative to (default: the page's folder).
    """

    page: Path | None = None
    root: Path | None = None
    max_bytes: int = _DEFAULT_MAX_BYTES
    encodings: Sequence[str] = ("cp1252",)
    warnings: list[str] = field(default_factory=list)
    left_out: Counter[str] = field(default_factory=Counter)
    labels: dict[str, str] = field(default_factory=dict)  # explicit label -> its section's title
    doc_titles: dict[str, str] = field(default_factory=dict)  # the project's pages (path, no suffix) -> title
    api_docstrings: bool = False  # fill autodoc directives from the installed package's docstrings
    unimportable: list[str] = field(default_factory=list)  # autodoc objects that could not be imported
    chains: dict[str, tuple[Path, ...]] = field(default_factory=dict)  # source of inserted lines -> includers
    includes: int = 0
    #: Markdown to text for an ``include`` with a MyST/Markdown ``:parser:`` (given by the caller, which may
    #: import the Markdown reader: this module must not, as that reader reads reST blocks through this one)
    markdown: Callable[[str], str] | None = None
    #: reST to text in this context, for docstrings (set by the reST reader, which this module must not import)
    rst: Callable[[str], str] | None = None

    @property
    def source(self) -> str:
        """The source name of the page's own lines."""
        return str(self.page) if self.page is not None else "<string>"

    def warn(self, message: str) -> None:
        """Record a warning once."""
        if message not in self.warnings:
            self.warnings.append(message)

    def warn_unimportable(self) -> None:
        """One warning naming the autodoc objects that ``api_docstrings`` could not import (then forgotten)."""
        if self.unimportable:
            names = ", ".join(self.unimportable[:5]) + (", ..." if len(self.unimportable) > 5 else "")
            self.warn(f"{len(self.unimportable)} autodoc object(s) could not be imported, left out: {names}")
            self.unimportable = []

    def chain(self, source: str) -> tuple[Path, ...]:
        """The files whose inclusion put the lines of ``source`` in the page (the page first)."""
        if source in self.chains:
            return self.chains[source]
        return (self.page.resolve(),) if self.page is not None else ()


class _AnyOption(dict[str, Any]):
    """An option spec accepting every option (Sphinx adds options docutils does not know) as text."""

    def __missing__(self, key: str) -> Any:
        return directives.unchanged


def _options(*names: str) -> _AnyOption:
    return _AnyOption({n: directives.unchanged for n in names})


def _context(directive: Any) -> RstContext:
    ctx = getattr(directive.state.document.settings, "ragrade_context", None)
    return ctx if isinstance(ctx, RstContext) else RstContext()


def _line_source(directive: Any) -> str:
    """The source name of the directive's line (the page, or the included file it came from)."""
    machine = directive.state_machine
    try:
        return str(machine.input_lines.source(directive.lineno - machine.input_offset - 1))
    except (IndexError, AttributeError, TypeError):
        return ""


def resolve(ctx: RstContext, arg: str, source: str) -> Path | None:
    """The file a directive's path names, as Sphinx resolves it; None when there is none."""
    if arg.startswith("<") and arg.endswith(">"):
        candidates = [Path(states.__file__).parent / "include" / arg[1:-1]]
    elif arg.startswith("/"):
        base = ctx.root or (ctx.page.parent if ctx.page is not None else None)
        candidates = [base / arg.lstrip("/")] if base is not None else []
    else:
        folders = [ctx.page.parent if ctx.page is not None else None]
        if source in ctx.chains:
            folders.append(ctx.chains[source][-1].parent)
        candidates = [folder / arg for folder in folders if folder is not None]
    return next((c.resolve() for c in candidates if c.is_file()), None)


def read_include(ctx: RstContext, name: str, path: Path) -> str | None:
    """The text of ``path``, included by directive ``name``; None (with a warning) when it is too large or
    unreadable (the MyST include reads through it too)."""
    try:
        size = path.stat().st_size
        if size > ctx.max_bytes:
            raise Skip("too-large", f"too large ({size:,} bytes > max {ctx.max_bytes:,})")
        return decode_bytes(path.read_bytes(), ctx.encodings)[0]
    except OSError as exc:
        ctx.warn(f"{name} file {path} left out: cannot read ({exc.strerror or exc})")
    except Skip as exc:
        ctx.warn(f"{name} file {path} left out: {exc.reason}")
    return None


def _line_numbers(spec: str, total: int) -> list[int]:
    """Sphinx's ``:lines:`` spec (``1,3,5-10,20-``) as 0-based line indexes."""
    out: list[int] = []
    for part in spec.split(","):
        ends = [e.strip() for e in part.split("-")]
        if len(ends) == 1 and ends[0]:
            out.append(int(ends[0]) - 1)
        elif len(ends) == 2 and ends != ["", ""]:
            start = int(ends[0] or 1)
            end = int(ends[1] or max(start, total))
            if start > end:
                raise ValueError(f"invalid line range {part.strip()!r}")
            out.extend(range(start - 1, end))
        else:
            raise ValueError(f"invalid line spec {part.strip()!r}")
    return out


def _pyobject(text: str, name: str) -> list[str]:
    """The lines of the class or function ``name`` (``Class.method``), decorators included."""
    try:
        body: list[ast.stmt] = ast.parse(text).body
    except SyntaxError as exc:
        raise ValueError(f":pyobject: needs Python source ({exc.msg})") from exc
    found: ast.stmt | None = None
    for part in name.split("."):
        defs = (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
        found = next((n for n in body if isinstance(n, defs) and n.name == part), None)
        if found is None:
            raise ValueError(f":pyobject: {name} not found")
        body = getattr(found, "body", [])
    assert found is not None
    start = min([found.lineno, *(d.lineno for d in getattr(found, "decorator_list", []))])
    return text.splitlines()[start - 1 : found.end_lineno]


def _first(lines: list[str], marker: str, key: str) -> int:
    index = next((k for k, line in enumerate(lines) if marker in line), None)
    if index is None:
        raise ValueError(f":{key}: text not found: {marker!r}")
    return index


def cut(text: str, options: dict[str, Any]) -> list[str]:
    """The lines of ``text`` the directive's options keep; ValueError when a cut matches nothing."""
    lines = _pyobject(text, str(options["pyobject"])) if options.get("pyobject") else text.splitlines()
    if "start-line" in options or "end-line" in options:
        start, end = options.get("start-line"), options.get("end-line")
        lines = lines[int(start) if start else None : int(end) if end else None]
    for key in ("start-after", "start-at"):
        if options.get(key):
            index = _first(lines, str(options[key]), key)
            lines = lines[index + 1 if key == "start-after" else index :]
    for key in ("end-before", "end-at"):
        if options.get(key):
            index = _first(lines, str(options[key]), key)
            lines = lines[: index if key == "end-before" else index + 1]
    if options.get("lines"):
        picked = [i for i in _line_numbers(str(options["lines"]), len(lines)) if 0 <= i < len(lines)]
        if not picked:
            raise ValueError(f":lines: {options['lines']} is out of range ({len(lines)} lines)")
        lines = [lines[i] for i in picked]
    if "dedent" in options:
        width = str(options["dedent"] or "").strip()
        lines = textwrap.dedent("\n".join(lines)).split("\n") if not width else _dedent(lines, int(width))
    return lines


def _dedent(lines: list[str], width: int) -> list[str]:
    return [line[width:] if not line[:width].strip() else line.lstrip() for line in lines]


def _code(text: str, language: str) -> Any:
    return nodes.literal_block(text, text, language=language)


class _FileDirective(Directive):  # type: ignore[misc]  # docutils is untyped
    required_arguments = 1
    final_argument_whitespace = True

    def read(self) -> tuple[Path, tuple[Path, ...], list[str]] | None:
        """The file named, the chain of files including the directive and the lines its options keep; None when
        the file is missing or a cut matches nothing (warned)."""
        found = self.found()
        lines = self.lines(found[0], found[2]) if found else None
        if found is None or lines is None:
            return None
        return found[0], found[1], lines

    def found(self) -> tuple[Path, tuple[Path, ...], str] | None:
        """The file named, the chain of files including the directive and the file's text; None: warned."""
        ctx = _context(self)
        arg = str(self.arguments[0]).strip()
        source = _line_source(self)
        chain = ctx.chain(source)
        where = f" (in {chain[-1].name})" if len(chain) > 1 else ""
        path = resolve(ctx, arg, source)
        if path is None:
            ctx.warn(f"{self.name} file not found, left out: {arg}{where}")
            return None
        if path in chain or len(chain) > _MAX_DEPTH:
            ctx.warn(f"include cycle, left out: {' -> '.join(p.name for p in (*chain, path))}")
            return None
        ctx.includes += 1
        if ctx.includes > _MAX_INCLUDES:
            ctx.warn(f"more than {_MAX_INCLUDES} included files in one page; the rest left out")
            return None
        text = read_include(ctx, self.name, path)
        return None if text is None else (path, chain, text)

    def lines(self, path: Path, text: str) -> list[str] | None:
        """The lines kept by the options; None (warned) when a cut matches nothing."""
        try:
            return cut(text, self.options)
        except ValueError as exc:
            _context(self).warn(f"{self.name} {path} left out: {exc}")
            return None


class _Include(_FileDirective):
    option_spec = _options("literal", "code", "parser", "start-line", "end-line", "start-after", "end-before")

    def run(self) -> list[Any]:
        got = self.read()
        if got is None:
            return []
        path, chain, lines = got
        text = "\n".join(lines)
        if "literal" in self.options or "code" in self.options:
            return [_code(text, str(self.options.get("code") or ""))]
        parser = str(self.options.get("parser") or "").lower()
        ctx = _context(self)
        if ("myst" in parser or "markdown" in parser) and ctx.markdown is not None:
            return [nodes.container("", nodes.Text(ctx.markdown(text)))]
        label = str(path) if str(path) not in ctx.chains else f"{path} (include {ctx.includes})"
        ctx.chains[label] = (*chain, path)
        tab_width = int(self.state.document.settings.tab_width)
        self.state_machine.insert_input(statemachine.string2lines(text, tab_width, convert_whitespace=True), label)
        return []


class _LiteralInclude(_FileDirective):
    option_spec = _options("language", "lines", "start-after", "end-before", "caption", "dedent", "pyobject")

    def run(self) -> list[Any]:
        got = self.read()
        if got is None:
            return []
        path, _, lines = got
        if self.options.get("prepend"):
            lines = [str(self.options["prepend"]), *lines]
        if self.options.get("append"):
            lines = [*lines, str(self.options["append"])]
        out: list[Any] = []
        if "caption" in self.options:
            caption = str(self.options["caption"] or "").strip() or path.name
            out.append(nodes.paragraph(caption, caption))
        out.append(_code("\n".join(lines), str(self.options.get("language") or "")))
        return out


class _Autodoc(Directive):  # type: ignore[misc]  # docutils is untyped
    optional_arguments = 1
    final_argument_whitespace = True
    has_content = True
    option_spec = _options("members", "undoc-members", "show-inheritance", "toctree", "nosignatures")

    def run(self) -> list[Any]:
        ctx = _context(self)
        filled = self.filled(ctx)
        if filled is not None:
            return filled
        ctx.left_out[AUTODOC_KIND] += 1
        if not self.content or self.name.lower() in _NAMES_ONLY:
            return []
        body = nodes.container()
        self.state.nested_parse(self.content, self.content_offset, body)
        name = str(self.arguments[0]).strip() if self.arguments else ""
        return [nodes.paragraph("", "", nodes.literal(name, name)), body] if name else [body]

    def filled(self, ctx: RstContext) -> list[Any] | None:
        """With ``api_docstrings``: the object's documentation from the installed package; None when it cannot be."""
        name = str(self.arguments[0]).strip().split("(")[0].strip() if self.arguments else ""
        if not ctx.api_docstrings or not name or self.name.lower() in _NAMES_ONLY or ctx.rst is None:
            return None
        from ragrade.corpus.apidoc import import_object, object_markdown

        obj = import_object(name)
        if obj is None:
            ctx.unimportable.append(name)
            return None
        members = "members" in self.options or self.name.lower() != "automodule"
        section = self.state.parent
        level = int(getattr(self.state.memo, "section_level", 0))
        named = section.tagname == "section" and section.children and section.children[0].tagname == "title"
        title = section.children[0].astext().strip("` ") if named else ""
        # the page's section named after the object (``pytest.approx`` / ``.. autofunction:: pytest.approx``)
        heading = not (title and title in (name, name.rsplit(".", 1)[-1]) and len(section.children) <= 2)
        text = object_markdown(
            name,
            obj,
            level=level if not heading else level + 1,
            with_members=members,
            docstring=ctx.rst,
            heading=heading,
        )
        return [nodes.container("", nodes.Text(text))]


_DIRECTIVES: dict[str, Any] = {
    "include": _Include,
    "literalinclude": _LiteralInclude,
    **dict.fromkeys(AUTODOC_DIRECTIVES, _Autodoc),
}


@contextmanager
def file_directives() -> Iterator[None]:
    """Install the directives above in docutils' directive table for the duration of a parse."""
    table: dict[str, Any] = directives._directives
    saved = {name: table.get(name) for name in _DIRECTIVES}
    table.update(_DIRECTIVES)
    try:
        yield
    finally:
        for name, before in saved.items():
            if before is None:
                table.pop(name, None)
            else:
                table[name] = before


__all__ = ["AUTODOC_DIRECTIVES", "AUTODOC_KIND", "RstContext", "cut", "file_directives", "read_include", "resolve"]
