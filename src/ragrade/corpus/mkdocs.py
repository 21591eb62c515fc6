"""MkDocs Material syntax as authors see it: content tabs, autorefs, code annotations, fence attributes.

Used by :mod:`ragrade.corpus.markdown`:

* :func:`tabs_plugin` parses pymdownx content tabs (``=== "pip"`` with a body indented by four
  spaces) as ``tab_open`` / ``tab_close`` containers holding the label (an ``inline`` token) and
  the body parsed as Markdown, so fenced code in a tab stays a code block and prose stays prose;
* :func:`drop_autorefs` turns mkdocs-autorefs links (``[text][pkg.Name]``, ``[pkg.Name][]``: a
  reference with no link definition in the page, which markdown-it leaves as text) into their text;
* :func:`drop_annotations` removes Material's code annotation markers (a comment holding only
  ``(1)`` or ``(1)!``) from code lines;
* :func:`fence_language` reads the language of a fence info string with attributes
  (``python {requires="3.12"}``, ``{ .python .annotate }``, ``py title="app.py"``);
* :func:`drop_macros` replaces mkdocs-macros / Jinja placeholders: ``{{ name }}`` by the value of a
  variable the site defines (``extra:`` in ``mkdocs.yml``), every other ``{{ ... }}`` and ``{% ... %}``
  removed and counted, ``{# ... #}`` comments removed, ``{% raw %}`` text kept as written;
* :func:`drop_attr_lists` removes Python-Markdown ``attr_list`` lists (``{ #id .class key=value }``,
  ``{: .lead }``) where that extension reads them: right after an inline element, at the end of a heading,
  a definition term or a table cell, on the last line of a paragraph;
* :func:`drop_icons` removes emoji and icon shortcodes (``:material-check:``, ``:octicons-heart-16:``,
  ``:fontawesome-brands-github:``; ``:smile:`` where the site enables ``pymdownx.emoji``): the built site
  shows a picture there; a table cell holding only icons keeps their names (``check``), which is what
  the picture says;
* :func:`inline_code` drops the ``#!python`` / ``:::css`` language prefix of pymdownx.inlinehilite.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ragrade.corpus.roles import markdown_blocks

if TYPE_CHECKING:
    from markdown_it import MarkdownIt
    from markdown_it.rules_block import StateBlock

# ``=== "Label"``; ``===+`` selects the tab, ``===!`` starts a new group
_TAB_RE = re.compile(r"===[+!]{0,2}[ \t]+\"(.*)\"[ \t]*")
_TAB_INDENT = 4
# inline code spans are kept as they are; ``[text][label]`` / ``[label][]`` left over by markdown-it
_AUTOREF_RE = re.compile(
    r"(?P<code>`[^`\n]*`)"
    r"|\[(?P<text>(?:`[^`\n]*`|[^\[\]`])+)\]\[(?P<label>[A-Za-z_][\w.:-]*)?\]"
)
_IDENT_RE = re.compile(r"`?[A-Za-z_][\w.:-]*`?")
# a trailing comment holding only an annotation marker: ``# (1)!``, ``// (2)``, ``/* (3) */``, ``<!-- (4) -->``
_ANNOTATION_RE = re.compile(r"(?<![^ \t])(?:#|//|--|;|%|/\*|<!--)[ \t]*\(\d+\)!?[ \t]*(?:\*/|-->)?[ \t]*$")
_LANG_RE = re.compile(r"[^\s{]+")
_JINJA_RE = re.compile(
    r"(?P<code>`[^`\n]*`)"
    r"|(?P<raw>\{%-?[ \t]*raw[ \t]*-?%\}(?P<kept>.*?)\{%-?[ \t]*endraw[ \t]*-?%\})"
    r"|(?P<expr>\{\{-?(?P<body>.*?)-?\}\})"
    r"|(?P<stmt>\{%.*?%\})"
    r"|(?P<comment>\{#.*?#\})",
    re.S,
)
_ONLY_TAG_RE = re.compile(r"^[ \t]*\x00[ \t]*\n", re.M)
_ATTR_LANG_RE = re.compile(r"(?:^|\s)\.([\w+#-]+)")
# Python-Markdown attr_list: ``{`` with an optional ``:``, then anything up to ``}`` on the line
_ATTR_BASE = r"\{:?[ \t]*[^}\n \t][^}\n]*\}"
#: an inline element closed here (a link, emphasis, inline code): attributes may follow it
ELEMENT_END = "\x01"
#: an icon removed here (an element too: attributes may follow it)
ICON_END = "\x02"
_ATTR_AFTER_RE = re.compile(rf"([\x01\x02]){_ATTR_BASE}")
_ATTR_HEADING_RE = re.compile(rf"[ \t]+{_ATTR_BASE}[ \t]*$")  # headings, terms, table cells
_ATTR_BLOCK_RE = re.compile(rf"(?:^|\n)[ \t]*{_ATTR_BASE}[ \t]*$")  # a paragraph's own last line
# the icon sets of MkDocs Material; other names (``:smile:``, custom sets) only where pymdownx.emoji is on
_ICON_RE = re.compile(r"(?<![\w:/`]):((?:material|octicons|fontawesome|simple)-[a-z0-9-]+):(?![\w:`/])")
_EMOJI_RE = re.compile(r"(?<![\w:/`]):([a-z0-9_+-]*[a-z][a-z0-9_+-]*):(?![\w:`/])")
_ICON_SETS = ("material-", "octicons-", "fontawesome-brands-", "fontawesome-solid-", "fontawesome-regular-", "simple-")
_ICON_SIZE_RE = re.compile(r"-(?:12|16|24|48)$")
_GAP_RE = re.compile(r"[ \t]\x02+(?=[ \t\n.,;:!?)\]]|$)")
_HILITE_RE = re.compile(r"^(?:#!|:::)[\w+#.-]+[ \t]+(?=\S)")


def _tab_rule(state: StateBlock, start_line: int, end_line: int, silent: bool) -> bool:
    """Block rule: a ``=== "Label"`` line and the lines indented under it, up to the first one that is not."""
    if state.is_code_block(start_line):
        return False
    start = state.bMarks[start_line] + state.tShift[start_line]
    m = _TAB_RE.fullmatch(state.src, start, state.eMarks[start_line])
    if m is None:
        return False
    if silent:
        return True
    body_indent = state.sCount[start_line] + _TAB_INDENT
    next_line = start_line + 1
    last = start_line + 1  # one past the last line of the body that is not blank
    while next_line < end_line:
        if not state.isEmpty(next_line):
            if state.sCount[next_line] < body_indent:
                break
            last = next_line + 1
        next_line += 1
    old_parent, old_line_max, old_indent = state.parentType, state.lineMax, state.blkIndent
    state.parentType = "tab"
    state.lineMax = last
    state.blkIndent = body_indent
    token = state.push("tab_open", "div", 1)
    token.block = True
    token.markup = "==="
    token.map = [start_line, last]
    token = state.push("inline", "", 0)
    token.content = m.group(1).strip()
    token.map = [start_line, start_line + 1]
    token.children = []
    state.md.block.tokenize(state, start_line + 1, last)
    token = state.push("tab_close", "div", -1)
    token.block = True
    state.parentType, state.lineMax, state.blkIndent = old_parent, old_line_max, old_indent
    state.line = last
    return True


def tabs_plugin(md: MarkdownIt) -> None:
    """Parse pymdownx.tabbed content tabs (``=== "Label"`` + indented body) as ``tab_open``/``tab_close``."""
    md.block.ruler.before("fence", "mkdocs_tab", _tab_rule, {"alt": ["paragraph", "reference", "blockquote", "list"]})


def drop_autorefs(text: str) -> str:
    """Reference links left unresolved (``[text][pkg.Name]``, ``[pkg.Name][]``) as their text.

    markdown-it has already turned every reference with a definition in the page into a link, so
    what is left in the rendered text is an autoref (or a broken link); inline code is left alone.
    """

    def one(m: re.Match[str]) -> str:
        if m.group("code") is not None:
            return m.group(0)
        shown = m.group("text")
        if m.group("label") is None and not _IDENT_RE.fullmatch(shown):
            return m.group(0)  # ``[some words][]`` names no object: not an autoref
        return shown

    return _AUTOREF_RE.sub(one, text) if "][" in text else text


def drop_annotations(code: str) -> str:
    """``code`` without Material's annotation markers (a trailing comment holding only ``(N)`` or ``(N)!``)."""
    if "(" not in code:
        return code
    out = []
    for line in code.split("\n"):
        cut, found = _ANNOTATION_RE.subn("", line)
        if not found:
            out.append(line)
        elif cut.strip():  # a line that held only the marker goes
            out.append(cut.rstrip())
    return "\n".join(out)


def fence_language(info: str) -> str:
    """The language of a fence info string, its attributes dropped (``""`` when it names none)."""
    info = info.strip()
    if info.startswith("{"):
        m = _ATTR_LANG_RE.search(info[1:].split("}", 1)[0])
        return m.group(1) if m else ""
    m = _LANG_RE.match(info)
    return m.group(0) if m else ""


def drop_macros(text: str, variables: dict[str, str], *, in_code: bool = False) -> tuple[str, int]:
    """``text`` without Jinja placeholders, and how many were removed (not replaced by a variable's value).

    ``in_code``: the page is rendered by the mkdocs-macros plugin, which renders code blocks too;
    otherwise fenced code and inline code keep what they show.
    """
    if "{{" not in text and "{%" not in text and "{#" not in text:
        return text, 0
    removed = [0]

    def one(m: re.Match[str]) -> str:
        if m.group("code") is not None:
            return f"`{_JINJA_RE.sub(one, m.group(0)[1:-1])}`" if in_code else m.group(0)
        if m.group("raw") is not None:
            return m.group("kept")
        if m.group("expr") is not None:
            name = m.group("body").split("|")[0].strip()
            if name in variables:
                return variables[name]
            removed[0] += 1
            return "\x00"
        if m.group("stmt") is not None:
            removed[0] += 1
        return "\x00"

    if in_code:
        out = _JINJA_RE.sub(one, text)
    else:
        out = "\n".join(b if code else _JINJA_RE.sub(one, b) for code, b in markdown_blocks(text))
    out = _ONLY_TAG_RE.sub("", out).replace("\x00", "")
    return out, removed[0]


def drop_attr_lists(text: str, *, where: str = "block") -> str:
    """``text`` (an inline's rendering, :data:`ELEMENT_END` after each inline element) without attribute lists.

    ``where``: ``"heading"`` for a heading, a definition term or a table cell (a list at the end, after a
    space), ``"block"`` for a paragraph (a list on its own last line), as Python-Markdown's attr_list reads.
    """
    if ELEMENT_END in text or ICON_END in text:
        text = _ATTR_AFTER_RE.sub(r"\1", text)
    if "{" not in text:
        return text
    return (_ATTR_HEADING_RE if where == "heading" else _ATTR_BLOCK_RE).sub("", text)


def _icon_name(code: str) -> str:
    """What an icon shows, in words: ``material-check-circle`` -> "check circle"."""
    for prefix in _ICON_SETS:
        if code.startswith(prefix):
            code = code[len(prefix) :]
            break
    return _ICON_SIZE_RE.sub("", code).replace("-", " ").replace("_", " ")


def drop_icons(text: str, *, emoji: bool = False, names: bool = False) -> str:
    """``text`` without icon shortcodes (and plain emoji ``:smile:`` when ``emoji``), each followed by
    :data:`ELEMENT_END` (attributes after an icon belong to it); ``names``: a table cell holding only icons
    keeps their names."""
    if ":" not in text:
        return text
    if names:
        bare = _ICON_RE.sub(ELEMENT_END, text)
        bare = _EMOJI_RE.sub(ELEMENT_END, bare) if emoji else bare
        names = bare != text and not drop_attr_lists(bare, where="heading").replace(ELEMENT_END, "").strip()

    def one(m: re.Match[str]) -> str:
        return _icon_name(m.group(1)) + ELEMENT_END if names else ICON_END

    text = _ICON_RE.sub(one, text)
    return _EMOJI_RE.sub(one, text) if emoji else text


def drop_markers(text: str) -> str:
    """``text`` without the :data:`ELEMENT_END` / :data:`ICON_END` markers; the space before an icon that was
    removed goes too when punctuation or the end of a line follows it (``play :icon:.`` -> ``play.``)."""
    if ICON_END in text:
        text = _GAP_RE.sub("", text).replace(ICON_END, "")
    return text.replace(ELEMENT_END, "")


def inline_code(code: str) -> str:
    """Inline code as shown: pymdownx.inlinehilite's ``#!python`` / ``:::python`` language prefix dropped."""
    return _HILITE_RE.sub("", code) if code.startswith(("#!", ":::")) else code


__all__ = [
    "ELEMENT_END",
    "ICON_END",
    "drop_annotations",
    "drop_attr_lists",
    "drop_autorefs",
    "drop_icons",
    "drop_macros",
    "drop_markers",
    "fence_language",
    "inline_code",
    "tabs_plugin",
]
