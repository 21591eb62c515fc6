"""What Sphinx/MyST roles and directives mean as text (shared by the Markdown and reST readers)."""

from __future__ import annotations

import re

# roles naming an object of a domain (Python, C, C++, JavaScript; ``any``): a leading ``.`` is a search
# hint and ``~`` shows only the last component, neither is shown
_NAMED = (
    "attr attribute class const data deco decorator enum enumerator exc exception func function macro member meth "
    "method mod module obj object property struct type union var"
)
OBJECT_ROLES = frozenset(f"{_NAMED} any concept expr texpr".split())
# roles naming code objects: rendered as inline code, as Sphinx renders them
CODE_ROLES = frozenset(
    f"{_NAMED} code command confval directive envvar file kbd literal mailheader makevar option program py:func "
    "regexp role samp setting".split()
)
# roles whose text is shown as written (a file name, a sample, keys): no title, no ``!``, ``.`` or ``~``
VERBATIM_ROLES = frozenset(["file", "samp", "code", "literal", "kbd", "regexp", "command", "program", "math"])
# roles whose text is a label or a link with an optional title: ``text <label>`` -> text
LINK_ROLES = frozenset(
    ["ref", "doc", "term", "numref", "download", "any", "eq", "pep", "rfc", "abbr", "keyword", "token"]
)
# directives that hold no content to evaluate on (navigation, API stubs whose text is elsewhere)
DROP_DIRECTIVES = frozenset(
    [
        "toctree",
        "contents",
        "index",
        "highlight",
        "currentmodule",
        "module",
        "include",
        "literalinclude",
        "raw",
        "only-html",
        "autosummary",
        "automodule",
        "autoclass",
        "autofunction",
        "automethod",
        "autoattribute",
        "autodata",
        "autoexception",
        "autoprogram",
        "autodoc",
        "tabularcolumns",
        "meta",
        "sectionauthor",
        "moduleauthor",
        "codeauthor",
        "image",
        "figure-md",
        "graphviz",
        "inheritance-diagram",
        "mermaid",
        "plot",
        "rst-class",
        "default-role",
        "role",
        "default-domain",
        "tags",
        "glossary-index",
    ]
)
# directives that describe something: "Added in version 2.1: ..." style titles
_VERSION_TITLES = {
    "versionadded": "Added in version",
    "versionchanged": "Changed in version",
    "deprecated": "Deprecated since version",
    "versionremoved": "Removed in version",
}
_ABBR_RE = re.compile(r"\s*\([^()]*\)$")
_TITLE_RE = re.compile(r"^(.*?)\s*<([^<>]+)>$", re.S)
# a role in running text: reST ``:name:`text``` or MyST ``{name}`text```
_INLINE_ROLE_RE = re.compile(r"(?::([\w.+-]+(?::[\w.+-]+)?):|\{([\w.+:-]+)\})`([^`]+)`")


def fenced(lang: str, code: str) -> str:
    """A fenced code block long enough to hold ``code`` (which may itself contain fences)."""
    runs = [len(m.group(0)) for m in re.finditer(r"`{3,}", code)]
    fence = "`" * max(3, max(runs, default=0) + 1)
    return f"{fence}{lang}\n{code.rstrip()}\n{fence}"


def role_text(name: str, content: str) -> str:
    """The text a role shows in the built docs, as Sphinx renders it.

    An explicit title wins (``title <target>`` -> title); otherwise the target, without the ``!`` that
    suppresses the link; for the roles naming code objects also without the leading ``.`` (a search
    hint) and, after a ``~``, only its last component (``~a.b.C`` -> C). Verbatim roles (``:file:``,
    ``:samp:``, ``:kbd:`` ...) keep their text as written.
    """
    text = content.strip()
    short = name.split(":")[-1]
    if short in VERBATIM_ROLES:
        return text
    if short == "abbr":
        return _ABBR_RE.sub("", text)
    m = _TITLE_RE.match(text)
    if m and m.group(1):
        return m.group(1).strip()
    if m:
        text = m.group(2).strip()
    text = text.removeprefix("!")
    if short in OBJECT_ROLES:
        text = _object_name(text)
    if short == "pep":
        return f"PEP {text}"
    if short == "rfc":
        return f"RFC {text}"
    if short in ("ref", "numref", "term", "doc") and m is None and "/" in text:
        text = text.rsplit("/", 1)[-1]
    return text


def _object_name(target: str) -> str:
    """An object target as shown: ``.Request`` -> Request, ``~pkg.mod.func`` -> func (``::`` for C++)."""
    text = target.lstrip(".")
    if text.startswith("~"):
        text = re.split(r"\.|::", text[1:].lstrip("."))[-1]
    return text


def roles_in_text(text: str) -> str:
    """Every role in ``text`` replaced by its text (code roles as inline code)."""

    def one(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2) or ""
        shown = role_text(name, m.group(3))
        return f"`{shown}`" if name.split(":")[-1] in CODE_ROLES and shown else shown

    return _INLINE_ROLE_RE.sub(one, text)


def directive_title(name: str, argument: str) -> str:
    """The title line of an admonition-like directive (``note`` -> "Note", ``versionadded 2.1`` -> ...)."""
    short = name.split(":")[-1]
    argument = roles_in_text(argument)
    if short == "seealso":
        return f"See also: {argument}" if argument else "See also"
    if short in _VERSION_TITLES:
        return f"{_VERSION_TITLES[short]} {argument}".strip() + ":"
    if short in ("admonition", "topic", "sidebar", "rubric", "dropdown", "card", "tab-item", "tab"):
        return argument
    label = short.replace("-", " ").capitalize()
    return f"{label}: {argument}" if argument else label


_MD_FENCE_RE = re.compile(r"^[ \t]*(`{3,}|~{3,})")


def markdown_blocks(text: str) -> list[tuple[bool, str]]:
    """``text`` cut into ``(is_code, block)`` parts: fenced code blocks (fences included) and the rest.

    A fence is a line starting with three or more backticks or tildes; it closes at a line starting
    with the same character at least as many times (or at the end of the text).
    """
    out: list[tuple[bool, str]] = []
    buf: list[str] = []
    fence: str | None = None
    for line in text.split("\n"):
        m = _MD_FENCE_RE.match(line)
        if fence is None and m:
            if buf:
                out.append((False, "\n".join(buf)))
            buf, fence = [line], m.group(1)
        elif fence is not None and m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
            buf.append(line)
            out.append((True, "\n".join(buf)))
            buf, fence = [], None
        else:
            buf.append(line)
    if buf:
        out.append((fence is not None, "\n".join(buf)))
    return out


__all__ = [
    "CODE_ROLES",
    "DROP_DIRECTIVES",
    "LINK_ROLES",
    "OBJECT_ROLES",
    "VERBATIM_ROLES",
    "directive_title",
    "fenced",
    "markdown_blocks",
    "role_text",
    "roles_in_text",
]
