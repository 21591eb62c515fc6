"""Markdown (CommonMark + MyST + MkDocs Material) to structured plain text, with markdown-it-py.

The text keeps the structure that chunkers and readers need and drops the markup that is not content:

* headings stay ``#`` lines (``## Section``), attribute lists (``{ #anchor }``) dropped; the page title is
  the front matter ``title:``, else the first level-1 heading, else the first heading when it heads the
  whole page (no text before it, no later heading at its level or above: one of several ``##`` sections
  names its section, not the page; :func:`ragrade.corpus.structure.heading_title`);
* code stays code: fenced and indented blocks and MyST ``{code-block}`` / ``{code}`` directives become
  fenced blocks with their language (directive options and fence attributes such as
  ``{requires="3.12"}`` dropped; Material code annotation markers ``# (1)!`` removed); inline code
  keeps its backticks;
* MyST roles become their text (``{ref}`text <label>``` -> ``text``); roles that name code objects
  (``{class}``, ``{func}``, ...) become inline code; ``{include}`` and ``{literalinclude}`` are inlined
  (:mod:`ragrade.corpus.myst_include`), ``{eval-rst}`` is read as reST in the page's context; targets
  ``(label)=``, ``%`` comments, ``+++`` breaks, ``{toctree}`` and other navigation directives are dropped;
* admonitions (MyST ``{note}``, MkDocs ``!!! note "Title"``, ``??? tip``, pymdownx ``/// tip | Title``)
  keep their title line and content; MkDocs Material content tabs (``=== "pip"`` + indented body)
  become a ``pip:`` label line and their body, parsed as Markdown;
* links and images become their text, mkdocs-autorefs links (``[text][pkg.Name]``, ``[pkg.Name][]``)
  too; emphasis markers go.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ragrade.corpus.mkdocs import (
    ELEMENT_END,
    drop_annotations,
    drop_attr_lists,
    drop_autorefs,
    drop_icons,
    drop_markers,
    fence_language,
    inline_code,
    tabs_plugin,
)
from ragrade.corpus.roles import CODE_ROLES, DROP_DIRECTIVES, directive_title, fenced, markdown_blocks, role_text
from ragrade.corpus.site import PageContext
from ragrade.corpus.structure import heading_title
from ragrade.io import JSONObject

_DEF_LINE_RE = re.compile(r"^([ \t]*):[ \t]+\S", re.M)
# lines that start another block, never a term: a list item, a heading, a table row, a quote, an admonition,
# a definition, a tab, an HTML tag, an indented line
_NOT_TERM_RE = re.compile(r"^(?:[-*+][ \t]|\d+[.)][ \t]|#|\||>|!!!|\?\?\?|:[ \t]|===|<|[ \t])")
_ABBR_DEF_RE = re.compile(r"^[ \t]{0,3}\*\[[^\]\n]+\]:[^\n]*$", re.M)  # Python-Markdown abbr definitions
# inline tokens after which an attribute list belongs to the element (Python-Markdown attr_list)
_ELEMENTS = frozenset(["link_close", "em_close", "strong_close", "s_close", "code_inline", "image", "html_inline"])
_BLOCK_RE = re.compile(r"^([ \t]*)///[ \t]*([\w-]*)[ \t]*(?:\|[ \t]*(.*?))?[ \t]*$", re.M)
_TAG_RE = re.compile(r"<[^>]*>")
_COMMENT_RE = re.compile(r"<!--.*?-->", re.S)
_DIRECTIVE_RE = re.compile(r"^\{([\w:.-]+)\}[ \t]*(.*)$")
_OPTION_RE = re.compile(r"^:[\w-]+:.*$")
_CODE_DIRECTIVES = frozenset({"code-block", "code", "sourcecode", "code-cell", "literalinclude"})

_PARSER: object = None


def _parser() -> Any:
    global _PARSER
    if _PARSER is None:
        try:
            from markdown_it import MarkdownIt
            from mdit_py_plugins.admon import admon_plugin
            from mdit_py_plugins.colon_fence import colon_fence_plugin
            from mdit_py_plugins.deflist import deflist_plugin
            from mdit_py_plugins.dollarmath import dollarmath_plugin
            from mdit_py_plugins.footnote import footnote_plugin
            from mdit_py_plugins.front_matter import front_matter_plugin
            from mdit_py_plugins.myst_blocks import myst_block_plugin
            from mdit_py_plugins.myst_role import myst_role_plugin
        except ImportError as exc:  # pragma: no cover - base dependencies
            from ragrade.errors import ConfigError

            raise ConfigError(
                "reading Markdown needs markdown-it-py and mdit-py-plugins: pip install markdown-it-py mdit-py-plugins"
            ) from exc
        md = MarkdownIt("commonmark", {"html": True}).enable("table").enable("strikethrough")
        for plugin in (front_matter_plugin, myst_role_plugin, myst_block_plugin, colon_fence_plugin, admon_plugin):
            md.use(plugin)
        md.use(tabs_plugin)
        md.use(deflist_plugin).use(dollarmath_plugin, allow_space=True, double_inline=True)
        md.use(footnote_plugin, inline=False, move_to_end=True)
        _PARSER = md
    return _PARSER


def _pymdownx_blocks(text: str) -> str:
    """pymdownx ``/// note | Title`` ... ``///`` blocks as plain title lines (``/// tab | pip`` as ``pip:``)."""

    def block(m: re.Match[str]) -> str:
        if not m.group(2):
            return ""
        if m.group(2) == "tab" and m.group(3):
            return f"{m.group(1)}{_label(m.group(3))}\n"
        title = m.group(3) if m.group(3) else m.group(2).replace("-", " ").capitalize()
        return f"{m.group(1)}{title}\n"

    return _BLOCK_RE.sub(block, text)


def _label(text: str) -> str:
    """A tab label as a short line of its own: ``pip`` -> ``pip:``."""
    text = " ".join(text.split())
    return text if not text or text.endswith((":", ".", "?", "!")) else f"{text}:"


@dataclass
class _Notes:
    """A page's footnotes: their text by id until a block cites them, and the ids already written."""

    text: dict[int, str] = field(default_factory=dict)
    done: set[int] = field(default_factory=set)


class _Renderer:
    """Walks markdown-it tokens and writes structured text; notes whether MyST syntax was seen."""

    def __init__(
        self, env: JSONObject | None = None, ctx: PageContext | None = None, notes: _Notes | None = None
    ) -> None:
        self.meta: JSONObject = {}
        self.myst = False
        self.env: JSONObject = env if env is not None else {}  # link reference definitions, shared
        self.ctx = ctx if ctx is not None else PageContext()  # the page: its includes, warnings, counts
        self.top = notes is None  # the page itself, not a directive's content read on its own
        self.notes = notes if notes is not None else _Notes()  # the page's footnotes, shared with nested parts
        self.pending: list[int] = []  # footnotes referenced in the block being written
        site = self.ctx.site
        self.emoji = site is not None and "pymdownx.emoji" in site.markdown_extensions

    # ------------------------------------------------------------------ inline

    def inline(self, tokens: list[Any], where: str = "block") -> str:
        """The text of an inline token's children (``where``: "heading" for headings, terms and table cells)."""
        out: list[str] = []
        for tok in tokens:
            kind = tok.type
            if kind == "text":
                out.append(drop_icons(tok.content, emoji=self.emoji, names=where == "cell"))
            elif kind == "code_inline":
                out.append(f"`{inline_code(tok.content)}`")
            elif kind == "footnote_ref":
                self.pending.append(int(tok.meta["id"]))
            elif kind in ("softbreak", "hardbreak"):
                out.append("\n")
            elif kind == "myst_role":
                self.myst = True
                name = str(tok.meta.get("name", ""))
                text = role_text(name, tok.content)
                if name.split(":")[-1] == "ref" and "<" not in tok.content and self.ctx.site is not None:
                    text = self.ctx.site.labels.get(" ".join(text.lower().split()), text)  # the section's title
                out.append(f"`{text}`" if name.split(":")[-1] in CODE_ROLES and text else text)
            elif kind == "image":
                out.append(self.inline(tok.children or []))
            elif kind in ("math_inline", "math_inline_double"):
                out.append(tok.content)
            if kind in _ELEMENTS:
                out.append(ELEMENT_END)  # tags carry no text (their inner text is an ordinary text token)
        text = drop_autorefs("".join(out))
        return drop_markers(drop_attr_lists(text, where="block" if where == "block" else "heading"))

    # ------------------------------------------------------------------ blocks

    def render(self, text: str) -> str:
        if "*[" in text:
            text = _ABBR_DEF_RE.sub("", text)
        text = _join_terms(text)
        tokens = self.footnotes(_parser().parse(_pymdownx_blocks(text), self.env))
        out = self.blocks(tokens)
        if self.top:  # notes defined and never cited: where the built page shows them, at its end
            out.extend(self.notes.text.pop(k) for k in sorted(self.notes.text))
        return "\n\n".join(p for p in out if p.strip())

    def footnotes(self, tokens: list[Any]) -> list[Any]:
        """``tokens`` without the footnote block, whose notes are kept (as text) for the blocks citing them."""
        at = next((i for i, t in enumerate(tokens) if t.type == "footnote_block_open"), None)
        if at is None:
            return tokens
        end = _close(tokens, at)
        i = at + 1
        while i < end:
            if tokens[i].type == "footnote_open":
                j = _close(tokens, i)
                key = int(tokens[i].meta["id"])
                if key not in self.notes.done:
                    self.notes.text.setdefault(key, _join_item(self.blocks(tokens[i + 1 : j])))
                i = j
            i += 1
        self.pending = []
        return tokens[:at] + tokens[end + 1 :]

    def cited(self) -> list[str]:
        """The text of the footnotes cited since the last call (each once: the built page lists it once)."""
        notes = [self.notes.text.pop(k) for k in dict.fromkeys(self.pending) if k in self.notes.text]
        self.notes.done.update(self.pending)
        self.pending = []
        return [n for n in notes if n.strip()]

    def blocks(self, tokens: list[Any]) -> list[str]:
        out: list[str] = []
        i = 0
        while i < len(tokens):
            tok = tokens[i]
            kind = tok.type
            if kind == "heading_open":
                level = int(tok.tag[1])
                title = " ".join(self.inline(tokens[i + 1].children or [], "heading").split())
                if title:
                    out.append(f"{'#' * level} {title}")
                out.extend(self.cited())
                i += 3
                continue
            if kind == "inline":
                out.append(self.inline(tok.children or []))
                out.extend(self.cited())
            elif kind in ("fence", "code_block") or kind == "colon_fence":
                out.append(self.fence(tok))
            elif kind == "front_matter":
                self.front_matter(tok.content)
            elif kind in ("myst_target", "myst_line_comment", "myst_block_break"):
                self.myst = True
            elif kind == "html_block":
                plain = _TAG_RE.sub("", _COMMENT_RE.sub("", tok.content)).strip()
                if plain:
                    out.append(plain)
            elif kind == "math_block":
                out.append(tok.content.strip())
            elif kind == "admonition_title_open":
                pass  # the title's inline token follows
            elif kind == "tab_open":  # the label's inline token follows
                out.append(_label(self.inline(tokens[i + 1].children or [])))
                i += 2
                continue
            elif kind in ("bullet_list_open", "ordered_list_open"):
                j = _close(tokens, i)
                out.append(self.list_items(tokens[i + 1 : j], ordered=kind == "ordered_list_open"))
                i = j + 1
                continue
            elif kind == "table_open":
                j = _close(tokens, i)
                out.append(self.table(tokens[i + 1 : j]))
                out.extend(self.cited())
                i = j + 1
                continue
            elif kind == "dl_open":
                j = _close(tokens, i)
                out.extend(self.definitions(tokens[i + 1 : j]))
                i = j + 1
                continue
            i += 1
        return out

    def list_items(self, tokens: list[Any], *, ordered: bool) -> str:
        items: list[str] = []
        i = 0
        while i < len(tokens):
            if tokens[i].type == "list_item_open":
                j = _close(tokens, i)
                body = _join_item(self.blocks(tokens[i + 1 : j]))
                marker = f"{len(items) + 1}." if ordered else "-"
                pad = " " * (len(marker) + 1)
                items.append(f"{marker} " + body.replace("\n", "\n" + pad))
                i = j + 1
            else:
                i += 1
        return "\n".join(items)

    def table(self, tokens: list[Any]) -> str:
        rows: list[str] = []
        cells: list[str] = []
        for tok in tokens:
            if tok.type == "inline":
                cells.append(" ".join(self.inline(tok.children or [], "cell").split()))
            elif tok.type == "tr_close":
                rows.append(" | ".join(cells))
                cells = []
        return "\n".join(rows)

    def definitions(self, tokens: list[Any]) -> list[str]:
        """A definition list as "term: definition" paragraphs (a definition that is not a paragraph under "term:")."""
        out: list[str] = []
        terms: list[str] = []
        i = 0
        while i < len(tokens):
            tok = tokens[i]
            j = _close(tokens, i)
            if tok.type == "dt_open":
                terms.append(" ".join(self.inline(tokens[i + 1].children or [], "heading").split()))
            elif tok.type == "dd_open":
                body = [b for b in self.blocks(tokens[i + 1 : j]) if b.strip()]
                term, terms = ", ".join(t for t in terms if t), []
                prose = bool(body) and tokens[i + 1].type == "paragraph_open"
                head = f"{term}: {body.pop(0)}" if prose and term else (f"{term}:" if term else "")
                out.append(_join_item([head, *body]) if head else _join_item(body))
            i = j + 1
        out.extend(t for t in terms if t)
        return out

    def fence(self, tok: Any) -> str:
        info = tok.info.strip() if tok.type != "code_block" else ""
        m = _DIRECTIVE_RE.match(info)
        if m is None or m.group(1).startswith((".", "#")):  # ``{.python}``: attributes, not a directive
            if tok.type == "colon_fence":
                return self.render_nested(tok.content)
            return fenced(fence_language(info), drop_annotations(tok.content))
        self.myst = True
        name, arg = m.group(1).lower(), m.group(2).strip()
        body = _directive_body(tok.content)
        short = name.split(":")[-1]
        if short in ("include", "literalinclude"):
            from ragrade.corpus.myst_include import file_directive

            return file_directive(short, arg, tok.content, self.ctx, self.render_nested)
        if short in _CODE_DIRECTIVES:
            return fenced(arg.split()[0] if arg else "", body)
        if short in DROP_DIRECTIVES:
            return ""
        if short in ("eval-rst", "eval_rst"):
            return self.eval_rst(body)
        if short == "math":
            return body.strip()
        title = directive_title(short, arg)
        inner = self.render_nested(body)
        return "\n\n".join(p for p in (title, inner) if p)

    def eval_rst(self, body: str) -> str:
        """An ``{eval-rst}`` block read as reST in the page's context (its includes, autodoc counts, warnings)."""
        from ragrade.corpus.rst import rst_to_text
        from ragrade.corpus.rst_include import RstContext

        page = self.ctx.includes[-1] if self.ctx.includes else self.ctx.page
        root = self.ctx.site.root if self.ctx.site is not None else None
        rctx = RstContext(page=page, root=root, max_bytes=self.ctx.max_bytes, encodings=self.ctx.encodings)
        rctx.markdown, rctx.api_docstrings = (lambda md: self.render_nested(md)), self.ctx.api_docstrings
        text = rst_to_text(body, rctx)[0]
        rctx.warn_unimportable()
        self.ctx.warnings.extend(w for w in rctx.warnings if w not in self.ctx.warnings)
        self.ctx.left_out.update(rctx.left_out)
        return text

    def render_nested(self, text: str) -> str:
        sub = _Renderer(self.env, self.ctx, self.notes)
        rendered = sub.render(text)
        self.myst = self.myst or sub.myst
        return rendered

    def front_matter(self, content: str) -> None:
        for line in content.splitlines():
            key, sep, value = line.partition(":")
            if sep and key.strip() and not key.startswith((" ", "\t", "-")):
                self.meta[key.strip()] = value.strip().strip("\"'")


def _join_terms(text: str) -> str:
    """Definition lists with several term lines (or terms right after text) joined into one term line, so that
    markdown-it (one-line terms) reads them as Python-Markdown's def_list does: every line of the block before
    the first ``:`` line is a term (``Term 1\nTerm 2\n:   def`` -> ``Term 1, Term 2\n:   def``)."""
    if "\n" not in text or ":" not in text:
        return text
    out: list[str] = []
    for code, block in markdown_blocks(text):
        if code or not _DEF_LINE_RE.search(block):
            out.append(block)
            continue
        lines = block.split("\n")
        k = 1
        while k < len(lines):
            m = _DEF_LINE_RE.match(lines[k])
            j = k - 1  # the term lines: same indent as the marker, back to a blank line or another block
            while m and j > 0 and _is_term(lines[j - 1], m.group(1)) and _is_term(lines[j], m.group(1)):
                j -= 1
            if m and j < k - 1:
                lines[j:k] = [m.group(1) + ", ".join(line.strip() for line in lines[j:k])]
                k = j + 1
            k += 1
        out.append("\n".join(lines))
    return "\n".join(out)


def _is_term(line: str, indent: str) -> bool:
    """A line that may be a term of a definition list indented by ``indent``."""
    return bool(line.strip()) and line[: len(indent)] == indent and not _NOT_TERM_RE.match(line[len(indent) :])


def _join_item(blocks: list[str]) -> str:
    """The blocks of a list item: lines of text together, code blocks set apart by blank lines."""
    out = ""
    prev_code = False
    for block in (b for b in blocks if b.strip()):
        code = block.startswith(("```", "~~~"))
        out += ("\n\n" if code or prev_code else "\n") + block if out else block
        prev_code = code
    return out


def _close(tokens: list[Any], i: int) -> int:
    """Index of the token closing the block opened at ``i``."""
    depth = 0
    for j in range(i, len(tokens)):
        depth += tokens[j].nesting
        if depth == 0:
            return j
    return len(tokens) - 1


def _directive_body(content: str) -> str:
    """A MyST directive's content without its ``:option: value`` lines or ``---`` YAML options block."""
    lines = content.split("\n")
    if lines and lines[0].strip() == "---":
        end = next((k for k in range(1, len(lines)) if lines[k].strip() == "---"), 0)
        lines = lines[end + 1 :]
    while lines and _OPTION_RE.match(lines[0]):
        lines = lines[1:]
    return "\n".join(lines).strip("\n")


def markdown_page(text: str, ctx: PageContext | None = None) -> tuple[str, JSONObject, bool, str]:
    """:func:`markdown_to_text` with the title from the headings apart (``meta["title"]`` only from front matter).

    ``ctx`` is the page (for its MyST includes) and collects warnings and counts.
    """
    renderer = _Renderer(ctx=ctx)
    out = renderer.render(text)
    meta = {k: v for k, v in renderer.meta.items() if v != ""}
    return out, meta, renderer.myst, heading_title(out)


def markdown_to_text(text: str) -> tuple[str, JSONObject, bool]:
    """Markdown/MyST ``text`` as structured text, its metadata (front matter, title) and whether it uses MyST."""
    out, meta, myst, title = markdown_page(text)
    if title and not meta.get("title"):
        meta["title"] = title
    return out, meta, myst


__all__ = ["markdown_page", "markdown_to_text"]
