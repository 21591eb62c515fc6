"""Load a corpus from files and folders into cleaned :class:`~ragrade.corpus.types.Document` records.

``load_corpus(paths, cfg)`` walks each path (folders recursively, in sorted
order), reads every supported file (see :mod:`ragrade.corpus.formats`),
cleans the text (:func:`ragrade.corpus.clean.clean_text`) and returns a
:class:`LoadReport`: the documents plus every skipped file or record with
its reason. Nothing is dropped silently: hidden files and folders (names
starting with ``.``) inside a folder are not read but are counted.

A documentation site is read as its readers see it (:mod:`ragrade.corpus.site`):
pages take their ``mkdocs.yml`` nav or Sphinx toctree titles (after front matter,
before headings and file names), MkDocs snippets are inlined from the site's
snippet base, and what the built site generates or themes (mkdocstrings ``:::``
and autodoc blocks, ``{{ macro }}`` placeholders, theme templates, the site's own
configuration file) is left out and counted in ``left_out`` (:data:`LEFT_OUT_LABELS`
says each kind in words); ``api_docstrings`` and ``templates`` opt in to them.

Document ids are ``<slug of the relative path>-<10 hex digits of
sha1(relative path, text)>``, stable for the same file content under the same
relative path; JSON records that carry an id field keep that id.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ragrade.corpus import formats as fmt
from ragrade.corpus.clean import clean_text_counted, compile_patterns, looks_binary
from ragrade.corpus.site import TEMPLATE_EXTS, PageContext, Site, discover_site, file_title
from ragrade.corpus.types import Document
from ragrade.errors import DataError

DEFAULT_MAX_BYTES = 64 * 1024 * 1024


class CorpusConfig(BaseModel):
    """Options of corpus loading (``[corpus]`` in a config file; CLI flags override; unknown keys rejected)."""

    model_config = ConfigDict(extra="forbid")

    text_field: str | None = Field(default=None, description="JSON field with the text (default: text, ...)")
    id_field: str | None = Field(default=None, description="JSON field with the id (default: id, ...)")
    meta_fields: list[str] | None = Field(default=None, description="JSON fields kept as metadata (default: all)")
    drop_patterns: list[str] = Field(default_factory=list, description="regexes; matching lines are removed")
    max_bytes: int = Field(default=DEFAULT_MAX_BYTES, gt=0, description="files larger than this are skipped")
    min_chars: int = Field(default=1, ge=1, description="documents shorter than this after cleaning are skipped")
    fallback_encodings: list[str] = Field(
        default_factory=lambda: ["cp1252"], description="tried in order when a file is not valid UTF-8"
    )
    dedupe: bool = Field(default=True, description="skip documents whose cleaned text equals an earlier one")
    api_docstrings: bool = Field(
        default=False,
        description="fill mkdocstrings ':::' blocks and autodoc directives from the installed package's "
        "docstrings where it imports (runs the package's import code; no network, no install)",
    )
    templates: bool = Field(
        default=False, description="load theme templates (Jinja, .html under overrides/ or _templates/) as documents"
    )


@dataclass
class LoadReport:
    """Result of :func:`load_corpus`."""

    documents: list[Document] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    skip_kinds: Counter[str] = field(default_factory=Counter)
    warnings: list[tuple[str, str]] = field(default_factory=list)
    formats: Counter[str] = field(default_factory=Counter)
    files_read: int = 0
    hidden_ignored: int = 0
    lines_dropped: int = 0
    assets_ignored: Counter[str] = field(default_factory=Counter)
    left_out: Counter[str] = field(default_factory=Counter)  # directives not rendered, by kind (autodoc)
    _skip_kind: list[str] = field(default_factory=list, repr=False)  # the kind of each entry of ``skipped``

    def skip(self, path: str, kind: str, reason: str) -> None:
        """Record one skipped file or record."""
        self.skipped.append((path, reason))
        self.skip_kinds[kind] += 1
        self._skip_kind.append(kind)

    def skip_lines(self, examples: int = 3) -> list[str]:
        """The skipped files and records as lines to print: one each for a reason met at most ``examples`` times,
        else one line for the reason with its count and ``examples`` of them (a folder of schema files is one
        line, not one per file)."""
        by_kind: dict[str, list[tuple[str, str]]] = {}
        for (where, why), kind in zip(self.skipped, self._skip_kind, strict=True):
            by_kind.setdefault(kind, []).append((where, why))
        lines: list[str] = []
        for kind, items in by_kind.items():
            if len(items) <= examples:
                lines.extend(f"skipped {where}: {why}" for where, why in items)
                continue
            shown = "; ".join(f"{where}: {why}" for where, why in items[:examples])
            lines.append(f"skipped {len(items):,} ({kind}), e.g. {shown}; ...")
        return lines

    def checked_summary(self, where: str) -> dict[str, Any]:
        """:meth:`summary`, or a DataError naming ``where`` and the skip reasons when no document is usable."""
        summary = self.summary()
        if not self.documents:
            why = ", ".join(f"{k} {v}" for k, v in summary["skipped_by_reason"].items()) or "nothing found"
            raise DataError(f"no usable document in {where} ({why})")
        return summary

    def summary(self) -> dict[str, Any]:
        """Counts for printing and for file headers."""
        return {
            "documents": len(self.documents),
            "characters": sum(len(d.text) for d in self.documents),
            "by_format": dict(sorted(self.formats.items())),
            "files_read": self.files_read,
            "skipped": len(self.skipped),
            "skipped_by_reason": dict(sorted(self.skip_kinds.items())),
            "warnings": len(self.warnings),
            "hidden_ignored": self.hidden_ignored,
            "assets_ignored": dict(sorted(self.assets_ignored.items())),
            "lines_dropped": self.lines_dropped,
            "left_out": dict(sorted(self.left_out.items())),
        }


# what ``left_out`` counts, as the load summary says it
LEFT_OUT_LABELS = {
    "autodoc": "autodoc directives (they need the package imported); api_docstrings = true in [corpus] or "
    "--api-docstrings fills them",
    "mkdocstrings": "mkdocstrings ':::' objects (generated from docstrings: api_docstrings = true in [corpus] or "
    "--api-docstrings fills them from the installed package)",
    "api-pages": "generated API pages with no text of their own (':::' or autodoc only; not loaded)",
    "macros": "{{ macro }} / Jinja placeholders (rendered only by mkdocs-macros; mkdocs.yml extra values filled in)",
    "site-config": "site configuration files (mkdocs.yml, conf.py: read for page titles and snippets)",
    "templates": "theme templates (Jinja / overrides/*.html; templates = true in [corpus] or --templates loads them)",
}


def left_out_label(kind: str) -> str:
    """What ``left_out[kind]`` counts, in words."""
    return LEFT_OUT_LABELS.get(kind, f"{kind} directives")


# files of a documentation site that hold no text to evaluate on: counted in one line, not warned one by one
_ASSETS = ".png .jpg .jpeg .gif .svg .webp .ico .bmp .tif .tiff .avif .css .scss .sass .less .js .mjs .cjs .map"
_MEDIA = ".woff .woff2 .ttf .otf .eot .mp4 .webm .mp3 .wav .ogg .zip .gz"
ASSET_EXTS = frozenset(f"{_ASSETS} {_MEDIA}".split())

_SLUG_RE = re.compile(r"[^a-z0-9]+")
_TEMPLATE_SNIFF = 64 * 1024  # bytes of an HTML file read to tell a theme template from a page


def make_doc_id(key: str, text: str) -> str:
    """A stable id from a path-like key and the document text."""
    slug = _SLUG_RE.sub("-", key.lower()).strip("-")[-60:].strip("-") or "doc"
    digest = hashlib.sha1(f"{key}\0{text}".encode()).hexdigest()[:10]
    return f"{slug}-{digest}"


def iter_files(root: Path, report: LoadReport) -> Iterator[tuple[Path, str]]:
    """Files under ``root`` in sorted order with their path relative to ``root`` (posix)."""
    if root.is_file():
        yield root, root.name
        return
    stack = [root]
    visited = {_real(root)}  # folders listed, by real path: a symlink back to one of them is a loop
    while stack:
        folder = stack.pop()
        try:
            entries = sorted(folder.iterdir(), key=lambda p: p.name)
        except OSError as exc:
            report.skip(str(folder), "unreadable", f"cannot list folder ({exc.strerror or exc})")
            continue
        subdirs = []
        for entry in entries:
            if entry.name.startswith("."):
                report.hidden_ignored += 1
            elif entry.is_dir():
                real = _real(entry)
                if real in visited:
                    report.skip(str(entry), "symlink-loop", f"a link to {real}, already read: not read again")
                    continue
                visited.add(real)
                subdirs.append(entry)
            elif entry.is_file():
                yield entry, entry.relative_to(root).as_posix()
            elif entry.is_symlink():
                report.skip(str(entry), "broken-link", "a symbolic link that leads nowhere (missing or a loop)")
        stack.extend(reversed(subdirs))


def _real(path: Path) -> str:
    """``path`` with every symbolic link resolved (its own path when that fails)."""
    try:
        return str(path.resolve(strict=True))
    except (OSError, RuntimeError):
        return str(path)


class _Loader:
    def __init__(self, cfg: CorpusConfig, report: LoadReport) -> None:
        self.cfg = cfg
        self.report = report
        self.patterns = compile_patterns(cfg.drop_patterns)
        self.fields = fmt.FieldMap(cfg.text_field, cfg.id_field, cfg.meta_fields)
        self.seen_ids: dict[str, str] = {}
        self.seen_text: dict[str, str] = {}
        self.root: Path | None = None  # the folder being loaded: the docs source root of its reST includes
        self.site: Site | None = None  # what its mkdocs.yml / toctrees say about its pages

    def is_template(self, path: Path, ext: str) -> bool:
        """A theme template, left out unless ``templates`` is set."""
        if self.cfg.templates or self.site is None:
            return False
        if ext in TEMPLATE_EXTS:
            return True
        if fmt.FORMATS.get(ext) != "html":
            return False
        try:
            with path.open("rb") as handle:
                data = handle.read(_TEMPLATE_SNIFF)
        except OSError:
            return False
        return self.site.is_template(path, data)

    def load_file(self, path: Path, rel: str, topic: str | None) -> None:
        ext = path.suffix.lower()
        kind = fmt.FORMATS.get(ext)
        if self.is_template(path, ext):
            self.report.left_out["templates"] += 1
            return
        if self.site is not None and self.site.is_config(path):
            self.report.left_out["site-config"] += 1
            return
        if kind is None and ext in ASSET_EXTS:
            self.report.assets_ignored[ext] += 1
            return
        if kind is None:
            self.report.skip(
                str(path),
                "unsupported",
                f"unsupported file type '{ext or path.name}' (supported: {', '.join(sorted(fmt.FORMATS))})",
            )
            return
        try:
            extracted = self._extract(path, kind)
        except fmt.Skip as exc:
            self.report.skip(str(path), exc.kind, exc.reason)
            return
        self.report.files_read += 1
        bad = [item for item in extracted if isinstance(item, fmt.BadRecord)]
        if bad and len(bad) == len(extracted) and kind == "json" and self.site is not None and self.site.config_files:
            # a data or config file of a documentation site (no record holds text): one skip, not one per record
            self.report.skip(str(path), "not-documents", f"{len(bad):,} records, none with text ({bad[0].reason})")
            return
        for item in extracted:
            if isinstance(item, fmt.BadRecord):
                self.report.skip(f"{path}{item.key}", item.kind, item.reason)
            else:
                self.report.warnings.extend((str(path), note) for note in item.warnings)
                self.report.left_out.update(item.left_out)
                self._add(path, rel, kind, topic, item)

    def _extract(self, path: Path, kind: str) -> list[fmt.Extracted | fmt.BadRecord]:
        try:
            size = path.stat().st_size
            if size > self.cfg.max_bytes:
                raise fmt.Skip("too-large", f"too large ({size:,} bytes > max {self.cfg.max_bytes:,})")
            if size == 0:
                raise fmt.Skip("empty", "empty file")
            data = path.read_bytes()
        except OSError as exc:
            raise fmt.Skip("unreadable", f"cannot read ({exc.strerror or exc})") from exc
        if kind == "pdf":
            return [fmt.read_pdf(data)]
        if kind == "html":
            if looks_binary(data) and not data.startswith((b"\xff\xfe", b"\xfe\xff")):
                raise fmt.Skip("binary", "binary file (NUL or control bytes), not HTML")
            return [fmt.read_html(data)]
        text, used = fmt.decode_bytes(data, self.cfg.fallback_encodings)
        if used:
            self.report.warnings.append((str(path), f"not valid UTF-8; decoded as {used}"))
        if kind == "md":
            page = PageContext(
                page=path,
                site=self.site,
                api_docstrings=self.cfg.api_docstrings,
                max_bytes=self.cfg.max_bytes,
                encodings=self.cfg.fallback_encodings,
            )
            return [fmt.read_markdown(text, page)]
        if kind == "rst":
            return [
                fmt.read_rst(
                    text,
                    path,
                    root=self.root,
                    max_bytes=self.cfg.max_bytes,
                    encodings=self.cfg.fallback_encodings,
                    api_docstrings=self.cfg.api_docstrings,
                    site=self.site,
                )
            ]
        if kind == "jsonl":
            return fmt.read_jsonl(text, self.fields)
        if kind == "json":
            return fmt.read_json(text, self.fields)
        return [fmt.read_text(text)]

    def _add(self, path: Path, rel: str, kind: str, topic: str | None, item: fmt.Extracted) -> None:
        where = f"{path}{item.key}"
        if item.api_page:
            self.report.left_out["api-pages"] += 1
            return
        text, dropped = clean_text_counted(item.text, self.patterns)
        self.report.lines_dropped += dropped
        if len(text) < self.cfg.min_chars:
            self.report.skip(
                where,
                "empty",
                "empty after text extraction and cleaning"
                if not text
                else f"shorter than {self.cfg.min_chars} characters after cleaning",
            )
            return
        doc_id = item.doc_id or make_doc_id(rel + item.key, text)
        if doc_id in self.seen_ids:
            self.report.skip(where, "duplicate", f"duplicate id '{doc_id}' (first in {self.seen_ids[doc_id]})")
            return
        if self.cfg.dedupe:
            digest = hashlib.sha1(text.encode()).hexdigest()
            if digest in self.seen_text:
                self.report.skip(where, "duplicate", f"same text as {self.seen_text[digest]}")
                return
            self.seen_text[digest] = where
        self.seen_ids[doc_id] = where
        meta: dict[str, Any] = {"format": kind, "path": rel + item.key}
        if topic:
            meta["topic"] = topic
        meta.update(item.metadata)
        self._title(meta, path, rel, item)
        self.report.documents.append(Document(id=doc_id, text=text, source=item.source or where, metadata=meta))
        self.report.formats[kind] += 1

    def _title(self, meta: dict[str, Any], path: Path, rel: str, item: fmt.Extracted) -> None:
        """The page title: front matter, then the site's nav/toctree label, the first heading, the file name."""
        label = self.site.title_for(path) if self.site is not None and not item.key else None
        if label and item.title_from != "front matter":
            meta["title"] = label
        if not meta.get("title"):
            meta["title"] = file_title(rel, self.site.site_name if self.site is not None else "")


def load_corpus(
    paths: Iterable[str | Path], cfg: CorpusConfig | None = None, *, progress: Callable[[str], None] | None = None
) -> LoadReport:
    """Load every supported file under ``paths`` into cleaned documents (see the module docstring)."""
    cfg = cfg or CorpusConfig()
    report = LoadReport()
    loader = _Loader(cfg, report)
    for raw_path in paths:
        root = Path(raw_path)
        if not root.exists():
            report.skip(str(root), "not-found", "no such file or folder")
            continue
        loader.root = root if root.is_dir() else root.parent
        files = list(iter_files(root, report))
        loader.site = discover_site(root, [path for path, _ in files])
        report.warnings.extend((str(loader.site.config or root), note) for note in loader.site.warnings)
        for path, rel in files:
            parts = rel.split("/")
            topic = parts[0] if len(parts) > 1 else None
            loader.load_file(path, rel, topic)
            if progress is not None:
                progress(rel)
    return report


__all__ = [
    "DEFAULT_MAX_BYTES",
    "LEFT_OUT_LABELS",
    "CorpusConfig",
    "LoadReport",
    "iter_files",
    "left_out_label",
    "load_corpus",
    "make_doc_id",
]
