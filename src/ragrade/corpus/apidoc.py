"""Generated API documentation: mkdocstrings ``::: package.Class`` blocks, and their text when asked for.

An mkdocstrings block is a line ``::: identifier`` (outside code) and the lines indented under it
(its YAML ``options:``). The site builds its text from the package's docstrings, so the source
holds none: :func:`api_blocks` takes the blocks out of the page and counts them
(``left_out["mkdocstrings"]``), so that neither the identifier nor the YAML options become text.

With ``api_docstrings`` (opt-in: it imports the user's package, which runs its code) a block whose
object can be imported from the current environment is replaced by that object's documentation,
written as Markdown by :func:`object_markdown`: a heading with its name, its signature as code,
its docstring, then its public members (those in ``options: members:`` when given) one level
down. Nothing is installed or downloaded; an object that cannot be imported is counted as left
out with one warning per page. The reST reader uses :func:`object_markdown` for autodoc
directives the same way.
"""

from __future__ import annotations

import importlib
import inspect
import re
import textwrap
from collections.abc import Callable
from typing import Any

from ragrade.corpus.roles import markdown_blocks
from ragrade.corpus.site import PageContext

MKDOCSTRINGS_KIND = "mkdocstrings"
_BLOCK_RE = re.compile(r"^(?P<space>[ \t]*):::[ \t]+(?P<name>[A-Za-z_][\w.:]*)[ \t]*$")
_FENCE_RE = re.compile(r"^[ \t]*(`{3,}|~{3,})")
_MAX_MEMBERS = 200
_HEADING_RE = re.compile(r"^(#{1,6}) ", re.M)
_HEADING_LINE_RE = re.compile(r"^[ \t]*(#{1,6})[ \t]+(.+?)[ \t#]*$")


def _object_block(lines: list[str], i: int) -> int | None:
    """The end (exclusive) of the mkdocstrings block starting at line ``i``, or None when there is none."""
    m = _BLOCK_RE.match(lines[i])
    if m is None:
        return None
    name, indent = m.group("name"), len(m.group("space").expandtabs(4))
    j = i + 1
    while j < len(lines) and (not lines[j].strip() or len(lines[j]) - len(lines[j].lstrip()) > indent):
        j += 1
    while j > i + 1 and not lines[j - 1].strip():
        j -= 1
    has_options = j > i + 1
    closed_later = any(ln.strip() == ":::" for ln in lines[j:])  # a ``::: note`` container, closed by ``:::``
    if "." not in name and ":" not in name and not has_options and closed_later:
        return None
    return j


def api_blocks(text: str, ctx: PageContext) -> tuple[str, int]:
    """``text`` with its mkdocstrings blocks left out (or filled, with ``ctx.api_docstrings``); their count."""
    if ":::" not in text:
        return text, 0
    lines = text.split("\n")
    out: list[str] = []
    fence: str | None = None
    found = 0
    missing: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        m = _FENCE_RE.match(line)
        if m and (fence is None or (m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence))):
            fence = m.group(1) if fence is None else None
        end = _object_block(lines, i) if fence is None else None
        if end is None:
            out.append(line)
            i += 1
            continue
        found += 1
        head = _BLOCK_RE.match(line)
        assert head is not None
        name = head.group("name").replace(":", ".")
        named = _named_by(out, name)  # the page's own heading just above names the object: no second one
        filled = _fill(name, lines[i + 1 : end], named) if ctx.api_docstrings else None
        if filled is None:
            ctx.left_out[MKDOCSTRINGS_KIND] += 1
            missing.append(name)
        else:
            out.extend(head.group("space") + ln if ln.strip() else "" for ln in filled.split("\n"))
        i = end
    if ctx.api_docstrings and missing:
        shown = ", ".join(missing[:5]) + (", ..." if len(missing) > 5 else "")
        ctx.warn(f"{len(missing)} mkdocstrings object(s) could not be imported, left out: {shown}")
    return "\n".join(out), found


def _options(option_lines: list[str]) -> dict[str, Any]:
    """The ``options:`` mapping of a block (empty when there is none or it is not valid YAML)."""
    if not option_lines:
        return {}
    try:
        import yaml

        data = yaml.safe_load(textwrap.dedent("\n".join(option_lines)))
    except Exception:
        return {}
    options = data.get("options") if isinstance(data, dict) else None
    return dict(options) if isinstance(options, dict) else {}


def _named_by(out: list[str], name: str) -> int | None:
    """The level of the heading right above a ``:::`` block (blank lines aside) when it names the object."""
    prev = next((line for line in reversed(out) if line.strip()), "")
    m = _HEADING_LINE_RE.match(prev)
    if m and m.group(2).strip("` ") in (name, name.rsplit(".", 1)[-1]):
        return len(m.group(1))
    return None


def _fill(name: str, option_lines: list[str], named: int | None = None) -> str | None:
    obj = import_object(name)
    if obj is None:
        return None
    options = _options(option_lines)
    level = options.get("heading_level", 2)
    level = named if named is not None else int(level) if isinstance(level, int) else 2
    members = options.get("members")
    wanted = [str(m) for m in members] if isinstance(members, list) else None
    return object_markdown(
        name, obj, level=level, members=wanted, with_members=members is not False, heading=named is None
    )


def import_object(name: str) -> Any | None:
    """The object a dotted path names, importing the longest importable module prefix; None when it fails."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:cut]))
        except (Exception, SystemExit):
            continue
        try:
            for attr in parts[cut:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return None
        return obj
    return None


def _signature(name: str, obj: Any) -> str:
    if not callable(obj):
        return ""
    try:
        sig = str(inspect.signature(obj))
    except (TypeError, ValueError):
        return ""
    short = name.rsplit(".", 1)[-1]
    return f"class {short}{sig}" if inspect.isclass(obj) else f"def {short}{sig}"


def _members(obj: Any, wanted: list[str] | None) -> list[tuple[str, Any]]:
    """The public members documented under ``obj``: its own (a module's from ``__all__`` or defined in it)."""
    if wanted is not None:
        return [(n, getattr(obj, n)) for n in wanted if hasattr(obj, n)]
    if inspect.ismodule(obj):
        names = getattr(obj, "__all__", None)
        if isinstance(names, (list, tuple)):
            return [(str(n), getattr(obj, str(n))) for n in names if hasattr(obj, str(n))]
        return [
            (n, v)
            for n, v in vars(obj).items()
            if not n.startswith("_")
            and (inspect.isclass(v) or inspect.isfunction(v))
            and getattr(v, "__module__", None) == obj.__name__
        ]
    if inspect.isclass(obj):
        out = []
        for n, v in vars(obj).items():
            if n.startswith("_"):
                continue
            target = v.__func__ if isinstance(v, (classmethod, staticmethod)) else v
            if inspect.isfunction(target) or isinstance(v, property):
                out.append((n, getattr(obj, n, v)))
        return out
    return []


def object_markdown(
    name: str,
    obj: Any,
    *,
    level: int = 2,
    members: list[str] | None = None,
    with_members: bool = True,
    docstring: Callable[[str], str] | None = None,
    heading: bool = True,
) -> str:
    """The documentation of ``obj`` as Markdown: heading, signature, docstring, then its members one level down.

    ``docstring`` turns a docstring into the page's text (the reST reader's, for autodoc: its headings are
    put below the object's); None keeps it as written (Markdown, for mkdocstrings). ``heading=False``: the
    page's own section already names the object (its members stay one level below ``level``).
    """
    parts = [f"{'#' * max(1, min(level, 6))} {name}"] if heading else []
    sig = _signature(name, obj.fget if isinstance(obj, property) else obj)
    if sig:
        parts.append(f"```python\n{sig}\n```")
    doc = inspect.getdoc(obj)
    if doc:
        parts.append(_below(docstring(doc), level) if docstring is not None else doc.strip())
    if with_members and (inspect.ismodule(obj) or inspect.isclass(obj)):
        for member_name, member in _members(obj, members)[:_MAX_MEMBERS]:
            if members is None and not inspect.getdoc(member):
                continue
            child_level = level + 1
            if inspect.isclass(member) and inspect.ismodule(obj):
                child = object_markdown(f"{name}.{member_name}", member, level=child_level, docstring=docstring)
            else:
                child = object_markdown(member_name, member, level=child_level, with_members=False, docstring=docstring)
            parts.append(child)
    return "\n\n".join(p for p in parts if p.strip())


def _below(text: str, level: int) -> str:
    """``text`` (structured text) with its ``#`` headings moved below a heading of ``level``."""
    if "#" not in text:
        return text.strip()
    out = []
    for code, block in markdown_blocks(text):
        if not code:
            block = _HEADING_RE.sub(lambda m: "#" * min(6, len(m.group(1)) + level) + " ", block)
        out.append(block)
    return "\n".join(out).strip()


__all__ = ["MKDOCSTRINGS_KIND", "api_blocks", "import_object", "object_markdown"]
