"""Readers for the corpus file formats: text, Markdown (MyST), reStructuredText, HTML, JSON/JSONL, PDF.

Readers get the raw bytes of one file and return extracted records (text not
yet cleaned, metadata). A file they cannot use raises :class:`Skip`; a bad
record inside a JSON/JSONL file is returned as a :class:`BadRecord` so that
the rest of the file still loads.
"""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragrade.corpus.clean import decode_bytes
from ragrade.corpus.site import PageContext, Site
from ragrade.corpus.types import Skip
from ragrade.io import JSONObject

TEXT_EXTS = {".txt": "txt", ".text": "txt", ".rst": "rst", ".rest": "rst", ".md": "md", ".markdown": "md"}
HTML_EXTS = {".html": "html", ".htm": "html", ".xhtml": "html"}
JSON_EXTS = {".json": "json", ".jsonl": "jsonl", ".ndjson": "jsonl"}
#: the key that marks a JSON Schema document (spelled with chr: a "$name" in a string is a setting's name here)
JSON_SCHEMA_KEY = chr(36) + "schema"
PDF_EXTS = {".pdf": "pdf"}
FORMATS: dict[str, str] = {**TEXT_EXTS, **HTML_EXTS, **JSON_EXTS, **PDF_EXTS}

TEXT_FIELDS = ("text", "content", "contents", "body", "page_content", "document", "passage", "article")
ID_FIELDS = ("id", "doc_id", "docid", "_id", "uuid", "key")
_RESERVED = {"metadata", "source"}


@dataclass
class Extracted:
    """One record of text taken from a file, before cleaning."""

    text: str
    metadata: dict[str, Any] = field(default_factory=dict)
    key: str = ""  # "" for a whole file, ":<line>" or "#<index>" for a record
    doc_id: str | None = None  # an id given by the record itself
    source: str | None = None
    warnings: list[str] = field(default_factory=list)  # for the load report (a missing included file ...)
    left_out: dict[str, int] = field(default_factory=dict)  # directives left out, by kind (autodoc)
    title_from: str = ""  # where metadata["title"] comes from: "front matter", "heading" or "" (the reader)
    api_page: bool = False  # nothing but generated API documentation (left out) and headings


@dataclass
class BadRecord:
    """A record of a JSON/JSONL file that was skipped."""

    key: str
    kind: str
    reason: str


@dataclass
class FieldMap:
    """Which JSON fields hold the text, the id and the metadata (None: automatic)."""

    text_field: str | None = None
    id_field: str | None = None
    meta_fields: Sequence[str] | None = None


# --------------------------------------------------------------------------- decoding


# --------------------------------------------------------------------------- text and markdown


def read_text(text: str) -> Extracted:
    """A plain-text file: the text itself; the title is the first line when it is short."""
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    meta = {"title": first} if 0 < len(first) <= 120 else {}
    return Extracted(text=text, metadata=meta)


def read_markdown(text: str, context: PageContext | None = None) -> Extracted:
    """Markdown (CommonMark, MyST, MkDocs Material) parsed with markdown-it-py.

    Headings stay ``#`` lines, code stays fenced code with its language, roles become their text,
    targets, comments and navigation directives go (see :mod:`ragrade.corpus.markdown`); front
    matter becomes metadata; ``myst: true`` is recorded when MyST syntax is used. Before parsing,
    ``--8<--`` snippets are inlined (:mod:`ragrade.corpus.snippets`), ``{{ macro }}`` placeholders
    replaced or counted (:func:`ragrade.corpus.mkdocs.drop_macros`) and mkdocstrings ``:::`` blocks
    counted or filled (:mod:`ragrade.corpus.apidoc`); ``context`` names the page and its site.
    """
    from ragrade.corpus.apidoc import api_blocks
    from ragrade.corpus.markdown import markdown_page
    from ragrade.corpus.mkdocs import drop_macros
    from ragrade.corpus.snippets import inline_snippets

    ctx = context or PageContext()
    text = inline_snippets(text, ctx)
    site = ctx.site
    text, macros = drop_macros(text, site.variables if site else {}, in_code=bool(site and site.macros_plugin))
    if macros:
        ctx.left_out["macros"] += macros
    text, api = api_blocks(text, ctx)
    out, meta, myst, heading = markdown_page(text, ctx)
    title_from = "front matter" if meta.get("title") else ""
    if heading and not title_from:
        meta["title"], title_from = heading, "heading"
    if myst:
        meta["myst"] = True
    return Extracted(
        text=out,
        metadata=meta,
        warnings=ctx.warnings,
        left_out=dict(ctx.left_out),
        title_from=title_from,
        api_page=(api > 0 or ctx.left_out.get("autodoc", 0) > 0) and _headings_only(out),
    )


def _headings_only(text: str) -> bool:
    """True when every line of ``text`` that is not blank is a ``#`` heading (a page with no text of its own)."""
    return all(line.startswith("#") for line in text.split("\n") if line.strip())


def read_rst(
    text: str,
    path: Path | None = None,
    *,
    root: Path | None = None,
    max_bytes: int | None = None,
    encodings: Sequence[str] = ("cp1252",),
    api_docstrings: bool = False,
    site: Site | None = None,
) -> Extracted:
    """reStructuredText parsed with docutils (Sphinx roles and directives reduced to text).

    ``path`` is the file (its includes are relative to its folder), ``root`` the docs source root
    (a leading ``/`` in an include's path); included files larger than ``max_bytes`` are left out;
    ``api_docstrings`` fills autodoc directives from the installed package's docstrings where it imports.
    ``site`` gives what the Sphinx project defines for every page: ``conf.py``'s ``|release|``/``|version|``
    and epilog, the labels of other pages' sections (``:ref:`label``` shows their title).
    """
    from ragrade.corpus.markdown import markdown_to_text
    from ragrade.corpus.rst import rst_to_text
    from ragrade.corpus.rst_include import RstContext
    from ragrade.corpus.sphinx import page_epilog, unresolved_substitutions

    ctx = RstContext(page=path, root=root, encodings=encodings, markdown=lambda md: markdown_to_text(md)[0])
    ctx.api_docstrings = api_docstrings
    if max_bytes is not None:
        ctx.max_bytes = max_bytes
    if site is not None:
        ctx.labels.update(site.labels)
        ctx.doc_titles = site.doc_titles
        text += page_epilog(text, site.substitutions, site.rst_epilog)
    for name in unresolved_substitutions(text, site.substitutions if site is not None else {}):
        ctx.warn(f"|{name}| left as written: no conf.py here sets {name} to a literal string")
    out, meta = rst_to_text(text, ctx)
    ctx.warn_unimportable()
    return Extracted(
        text=out,
        metadata=meta,
        warnings=ctx.warnings,
        left_out=dict(ctx.left_out),
        title_from="heading" if meta.get("title") else "",
        api_page=ctx.left_out.get("autodoc", 0) > 0 and _headings_only(out),
    )


# --------------------------------------------------------------------------- html

_DROP_TAGS = (
    "script",
    "style",
    "noscript",
    "template",
    "svg",
    "canvas",
    "iframe",
    "nav",
    "header",
    "footer",
    "aside",
    "form",
    "button",
    "input",
    "select",
    "textarea",
    "head",
    "meta",
    "link",
    "object",
    "embed",
)
_DROP_ROLES = ("navigation", "banner", "contentinfo", "search", "complementary", "menu")
_BLOCK_TAGS = (
    "p",
    "div",
    "section",
    "article",
    "main",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "li",
    "ul",
    "ol",
    "dl",
    "dt",
    "dd",
    "table",
    "tr",
    "blockquote",
    "pre",
    "figure",
    "figcaption",
    "address",
    "details",
    "summary",
    "hr",
    "caption",
)


def read_html(data: bytes) -> Extracted:
    """HTML: the main content's text (``<main>``, ``<article>`` or ``<body>``), boilerplate dropped."""
    from bs4 import BeautifulSoup

    soup: Any
    try:
        soup = BeautifulSoup(data, "lxml")
    except Exception:  # lxml missing or failing: the pure-Python parser
        soup = BeautifulSoup(data, "html.parser")
    title_tag = soup.find("title")
    title = title_tag.get_text(" ", strip=True) if title_tag else ""
    for tag in soup.find_all(_DROP_TAGS):
        tag.decompose()
    for tag in soup.find_all(attrs={"role": True}):
        if not getattr(tag, "decomposed", False) and str(tag.get("role")) in _DROP_ROLES:
            tag.decompose()
    for tag in soup.find_all(attrs={"hidden": True}):
        if not getattr(tag, "decomposed", False):
            tag.decompose()
    root: Any = soup.find("main") or soup.find("article") or soup.find(attrs={"role": "main"}) or soup.body or soup
    for br in root.find_all("br"):
        br.replace_with("\n")
    for block in root.find_all(_BLOCK_TAGS):
        if block.name == "li":
            block.insert(0, "- ")
        block.insert_before("\n\n")
        block.insert_after("\n\n")
    for cell in root.find_all(("td", "th")):
        cell.insert_after(" ")
    text = root.get_text()
    if not title:
        h1 = root.find("h1")
        title = h1.get_text(" ", strip=True) if h1 else ""
    return Extracted(text=text, metadata={"title": title} if title else {})


# --------------------------------------------------------------------------- pdf


def read_pdf(data: bytes) -> Extracted:
    """PDF text with pypdf, pages separated by blank lines."""
    from pypdf import PdfReader
    from pypdf.errors import PyPdfError

    logging.getLogger("pypdf").setLevel(logging.ERROR)
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise Skip("unreadable", "encrypted PDF (no password support)")
        pages = [page.extract_text() or "" for page in reader.pages]
        info = reader.metadata
    except Skip:
        raise
    except (PyPdfError, ValueError, KeyError, TypeError, OSError, RecursionError) as exc:
        raise Skip("unreadable", f"unreadable PDF ({type(exc).__name__}: {exc})") from exc
    meta: JSONObject = {"pages": len(pages)}
    title = getattr(info, "title", None) if info is not None else None
    if title:
        meta["title"] = str(title)
    return Extracted(text="\n\n".join(pages), metadata=meta)


# --------------------------------------------------------------------------- json


def _pick(record: Mapping[str, object], wanted: str | None, defaults: Sequence[str]) -> str | None:
    if wanted is not None:
        return wanted if wanted in record else None
    return next((f for f in defaults if f in record), None)


def record_to_extracted(rec: object, key: str, fields: FieldMap) -> Extracted | BadRecord:
    """One JSON record as :class:`Extracted`, or a :class:`BadRecord` saying what is wrong."""
    if not isinstance(rec, dict):
        return BadRecord(key, "invalid-record", f"expected a JSON object, got {type(rec).__name__}")
    tf = _pick(rec, fields.text_field, TEXT_FIELDS)
    if tf is None:
        want = fields.text_field or " / ".join(TEXT_FIELDS)
        have = ", ".join(sorted(rec)[:8]) or "none"
        return BadRecord(key, "invalid-record", f"no text field ({want}); fields: {have} (set --text-field)")
    value = rec[tf]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        value = "\n\n".join(value)
    if not isinstance(value, str):
        return BadRecord(key, "invalid-record", f"field '{tf}' is {type(value).__name__}, not text")
    idf = _pick(rec, fields.id_field, ID_FIELDS)
    if fields.id_field is not None and idf is None:
        return BadRecord(key, "invalid-record", f"no id field '{fields.id_field}'")
    doc_id = None
    if idf is not None and rec[idf] is not None and str(rec[idf]).strip():
        doc_id = str(rec[idf]).strip()
    meta: JSONObject = {}
    nested = rec.get("metadata")
    if isinstance(nested, dict) and tf != "metadata":
        meta.update(nested)
    if fields.meta_fields is not None:
        missing = [f for f in fields.meta_fields if f not in rec and f not in meta]
        if missing:
            return BadRecord(key, "invalid-record", f"no metadata field(s) {', '.join(missing)}")
        meta.update({f: rec[f] for f in fields.meta_fields if f in rec})
    else:
        meta.update({k: v for k, v in rec.items() if k not in (tf, idf, *_RESERVED)})
    source = rec.get("source") if isinstance(rec.get("source"), str) and rec.get("source") else None
    return Extracted(text=value, metadata=meta, key=key, doc_id=doc_id, source=source)


def read_jsonl(text: str, fields: FieldMap) -> list[Extracted | BadRecord]:
    """JSON Lines: one record per line; a ragrade header line is ignored."""
    out: list[Extracted | BadRecord] = []
    for lineno, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as exc:
            out.append(BadRecord(f":{lineno}", "invalid-record", f"not valid JSON ({exc.msg})"))
            continue
        except RecursionError:
            out.append(BadRecord(f":{lineno}", "invalid-record", "JSON nested too deeply"))
            continue
        if isinstance(rec, dict) and len(rec) == 1 and isinstance(rec.get("ragrade"), dict):
            continue
        out.append(record_to_extracted(rec, f":{lineno}", fields))
    return out


def read_json(text: str, fields: FieldMap) -> list[Extracted | BadRecord]:
    """A JSON file: a list of records, one record, or an object holding a list of records."""
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise Skip("invalid-record", f"not valid JSON (line {exc.lineno}: {exc.msg})") from exc
    except RecursionError as exc:
        raise Skip("invalid-record", "JSON nested too deeply") from exc
    if isinstance(obj, dict) and (JSON_SCHEMA_KEY in obj or ("properties" in obj and "type" in obj)):
        raise Skip("not-documents", "a JSON Schema, not documents")
    if isinstance(obj, dict):
        if _pick(obj, fields.text_field, TEXT_FIELDS) is not None:
            return [record_to_extracted(obj, "", fields)]
        lists = [v for v in obj.values() if isinstance(v, list) and v and all(isinstance(r, dict) for r in v)]
        if not lists:
            raise Skip("invalid-record", "no records: expected a list of objects or an object with a text field")
        obj = lists[0]
    if not isinstance(obj, list):
        raise Skip("invalid-record", f"expected a list of records, got {type(obj).__name__}")
    return [record_to_extracted(rec, f"#{i}", fields) for i, rec in enumerate(obj)]


__all__ = [
    "FORMATS",
    "ID_FIELDS",
    "TEXT_FIELDS",
    "BadRecord",
    "Extracted",
    "FieldMap",
    "Skip",
    "decode_bytes",
    "read_html",
    "read_json",
    "read_jsonl",
    "read_markdown",
    "read_pdf",
    "read_text",
    "record_to_extracted",
]
