"""What a Sphinx project defines for all its pages: section labels, ``conf.py`` substitutions and epilog.

Sphinx resolves ``:ref:`label``` (no explicit title) to the title of the section the label stands
before, wherever in the project that section is, and ``:doc:`page``` to that page's title; it defines
``|release|`` and ``|version|`` from ``conf.py`` (with ``rst_prolog`` / ``rst_epilog`` added to every
page). :func:`scan_labels` reads the labels of one page's source (reST ``.. _name:`` and MyST
``(name)=`` before a section title), :func:`first_title` its title; :func:`read_conf` reads ``conf.py``
without running it: only literal assignments (``release = "2.4.1"``) are used; a page using one that
is computed is warned (:func:`unresolved_substitutions`).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from ragrade.corpus.roles import roles_in_text

_RST_LABEL_RE = re.compile(r"^\.\.[ \t]+_([^:`\n][^:\n]*|`[^`\n]+`):[ \t]*$")
_MYST_LABEL_RE = re.compile(r"^\(([^()\s][^()\n]*)\)=[ \t]*$")
_MD_HEADING_RE = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t#]*$")
_ADORNMENT_RE = re.compile(r"^([!-/:-@\[-`{-~])\1{2,}[ \t]*$")
_LITERAL_RE = re.compile(r"``([^`\n]+)``")
_EMPHASIS_RE = re.compile(r"(?<![\w*])\*{1,2}([^*\n]+)\*{1,2}(?![\w*])")
_SUBST_DEF_RE = re.compile(r"^\.\.[ \t]+\|([^|\n]+)\|[ \t]+\w[\w:-]*::", re.M)
#: the substitutions Sphinx defines from ``conf.py``
CONF_SUBSTITUTIONS = ("release", "version")


def _title_text(raw: str) -> str:
    """A section title as the built page shows it: inline literals as code, roles as their text, emphasis gone."""
    text = roles_in_text(_LITERAL_RE.sub(r"`\1`", raw.strip()))
    return " ".join(_EMPHASIS_RE.sub(r"\1", text).split())


def _rst_title(lines: list[str], i: int) -> str | None:
    """The section title starting at line ``i`` (an overline, the title, an underline; or title, underline)."""
    if i + 1 >= len(lines):
        return None
    first, second = lines[i].rstrip(), lines[i + 1].rstrip()
    if _ADORNMENT_RE.match(first) and i + 2 < len(lines) and _ADORNMENT_RE.match(lines[i + 2].rstrip()):
        return second.strip() or None
    if first.strip() and not first[0].isspace() and _ADORNMENT_RE.match(second) and len(second) >= len(first):
        return first.strip()
    return None


def scan_labels(text: str, markdown: bool, out: dict[str, str]) -> None:
    """Add the labels of a page's source that stand before a section title to ``out`` (lower case -> title)."""
    lines = text.split("\n")
    pending: list[str] = []
    for i, line in enumerate(lines):
        m = (_MYST_LABEL_RE if markdown else _RST_LABEL_RE).match(line)
        if m:
            pending.append(" ".join(m.group(1).strip("`").lower().split()))
            continue
        if not pending or not line.strip():
            continue
        if markdown:
            h = _MD_HEADING_RE.match(line)
            title = h.group(2) if h else None
        else:
            title = _rst_title(lines, i)
        if title:
            for label in pending:
                out.setdefault(label, _title_text(title))
        pending = []


def first_title(text: str, markdown: bool) -> str | None:
    """The title a page's source opens with (its first section title; the first ``#`` heading in Markdown), as
    ``:doc:`page``` shows it."""
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if markdown:
            h = _MD_HEADING_RE.match(line)
            if h:
                return _title_text(h.group(2))
        elif line.strip() and not line[0].isspace():
            title = _rst_title(lines, i)
            if title:
                return _title_text(title)
    return None


def _literal(node: ast.expr) -> str | None:
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    return value if isinstance(value, str) else None


def read_conf(path: Path) -> tuple[dict[str, str], str]:
    """``conf.py``'s literal ``release``/``version`` and its ``rst_prolog`` + ``rst_epilog`` (a name assigned
    something computed is not read: the last assignment counts, as when Sphinx runs the file)."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, SyntaxError, ValueError):
        return {}, ""
    values: dict[str, str] = {}
    wanted = (*CONF_SUBSTITUTIONS, "rst_prolog", "rst_epilog")
    for node in tree.body:
        if not isinstance(node, ast.Assign | ast.AnnAssign) or node.value is None:
            continue
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for target in targets:
            if isinstance(target, ast.Name) and target.id in wanted:
                value = _literal(node.value)
                if value is None:
                    values.pop(target.id, None)
                else:
                    values[target.id] = value
    subs = {k: values[k] for k in CONF_SUBSTITUTIONS if k in values}
    epilog = "\n\n".join(values[k] for k in ("rst_prolog", "rst_epilog") if values.get(k, "").strip())
    return subs, epilog


def page_epilog(text: str, substitutions: dict[str, str], epilog: str) -> str:
    """What Sphinx adds to a page: the conf.py epilog and ``|release|``/``|version|`` definitions the page (and
    the epilog) do not define themselves."""
    defined = {m.group(1).strip() for m in _SUBST_DEF_RE.finditer(f"{text}\n{epilog}")}
    lines = [f".. |{k}| replace:: {v}" for k, v in substitutions.items() if k not in defined and f"|{k}|" in text]
    parts = [p for p in (epilog.strip("\n"), "\n".join(lines)) if p]
    return "\n\n" + "\n\n".join(parts) + "\n" if parts else ""


def unresolved_substitutions(text: str, substitutions: dict[str, str]) -> list[str]:
    """The ``|release|``/``|version|`` references of a page that conf.py gives no literal value for."""
    defined = {m.group(1).strip() for m in _SUBST_DEF_RE.finditer(text)}
    return [k for k in CONF_SUBSTITUTIONS if f"|{k}|" in text and k not in substitutions and k not in defined]


__all__ = ["CONF_SUBSTITUTIONS", "first_title", "page_epilog", "read_conf", "scan_labels", "unresolved_substitutions"]
