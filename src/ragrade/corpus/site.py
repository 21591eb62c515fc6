"""What a documentation site says about its pages: MkDocs ``mkdocs.yml`` and Sphinx ``toctree`` titles.

:func:`discover_site` looks at a loaded folder once, before its files are read:

* ``mkdocs.yml`` (or ``mkdocs.yaml``) in the folder or one of its two parents, when its ``docs_dir``
  holds the folder or lies inside it: the ``nav`` labels of pages (``- Validation errors:
  errors/validation_errors.md``), the ``pymdownx.snippets`` base paths (default: the folder of
  ``mkdocs.yml``, where ``mkdocs build`` runs), the theme's ``custom_dir`` (templates), the
  ``extra`` variables and ``site_name`` (for ``{{ macros }}``) and whether the ``macros`` plugin is on;
  unknown YAML tags (``!ENV``, ``!!python/name:``) are read as plain values;
* Sphinx section labels across the project (``:ref:`label``` shows its section's title on every page),
  and ``conf.py``'s literal ``release``, ``version``, ``rst_prolog`` and ``rst_epilog``
  (:mod:`ragrade.corpus.sphinx`);
* Sphinx ``toctree`` entries with an explicit title (``Title <path>``), in reST and in MyST
  (```` ```{toctree} ````), resolved as Sphinx does: relative to the page holding the toctree, a
  leading ``/`` relative to the source root (the folder of ``conf.py``, else the loaded folder).

A page's title is then, in this order: its front matter ``title:``, its ``nav``/toctree label, its
first heading (a level-1 heading, or a lone top heading of another level), its file name
(:func:`file_title`). The load report shows what could not be read here as one warning each.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MKDOCS_FILES = ("mkdocs.yml", "mkdocs.yaml")
# folders of theme templates (MkDocs ``custom_dir`` conventions, Sphinx ``templates_path``)
TEMPLATE_DIRS = frozenset(["overrides", "_templates", "templates", "partials", "theme", "_theme"])
TEMPLATE_EXTS = frozenset([".j2", ".jinja", ".jinja2", ".jinja-html", ".tpl"])
_TOCTREE_RST = re.compile(r"^([ \t]*)\.\.[ \t]+toctree::[^\n]*\n((?:\1[ \t]+[^\n]*\n|[ \t]*\n)*)", re.M)
_TOCTREE_MYST = re.compile(r"^[ \t]*(`{3,}|:{3,})[ \t]*\{toctree\}[^\n]*\n(.*?)^[ \t]*\1[ \t]*$", re.M | re.S)
_ENTRY_RE = re.compile(r"^(.*\S)\s*<([^<>]+)>$")
_SCANNED = (".rst", ".rest", ".txt", ".md", ".markdown")
_MAX_SCANNED = 20_000
_DOC_EXTS = ("", ".rst", ".rest", ".txt", ".md", ".markdown")
_PRE_RE = re.compile(r"<pre\b.*?</pre>", re.S | re.I)
_JINJA_LINE_RE = re.compile(r"^[ \t]*\{[%#]", re.M)


@dataclass
class Site:
    """What :func:`discover_site` found about the pages of one loaded folder."""

    root: Path
    config: Path | None = None  # the mkdocs.yml read
    docs_dir: Path | None = None
    titles: dict[str, str] = field(default_factory=dict)  # resolved page path (toctree: without suffix) -> title
    snippet_bases: list[Path] = field(default_factory=list)
    restrict_snippets: bool = True
    template_dirs: list[Path] = field(default_factory=list)
    variables: dict[str, str] = field(default_factory=dict)  # {{ name }} -> value (mkdocs.yml extra, site_name)
    macros_plugin: bool = False
    markdown_extensions: set[str] = field(default_factory=set)  # mkdocs.yml ``markdown_extensions`` names
    auto_append: list[Path] = field(default_factory=list)  # pymdownx.snippets files appended to every page
    substitutions: dict[str, str] = field(default_factory=dict)  # Sphinx |release|, |version|: from conf.py
    rst_epilog: str = ""  # Sphinx ``rst_prolog`` + ``rst_epilog`` of conf.py (literal strings), added to pages
    labels: dict[str, str] = field(default_factory=dict)  # Sphinx/MyST label (lower case) -> its section's title
    doc_titles: dict[str, str] = field(default_factory=dict)  # page path without its suffix -> its first title
    site_name: str = ""
    config_files: set[str] = field(default_factory=set)  # mkdocs.yml, Sphinx conf.py: read here, not documents
    warnings: list[str] = field(default_factory=list)

    def title_for(self, path: Path) -> str | None:
        """The nav or toctree label of the page ``path``, if the site gives one."""
        real = _resolved(path)
        return self.titles.get(str(real)) or self.titles.get(str(real.with_suffix("")))

    def is_config(self, path: Path) -> bool:
        """True for the site's own configuration file (``mkdocs.yml``, Sphinx ``conf.py``)."""
        return str(_resolved(path)) in self.config_files

    def is_template(self, path: Path, data: bytes) -> bool:
        """True for a theme template: a Jinja file, an HTML file in a template folder or holding Jinja tags."""
        ext = path.suffix.lower()
        if ext in TEMPLATE_EXTS:
            return True
        if ext not in (".html", ".htm", ".xml"):
            return False
        real = _resolved(path)
        if any(real.is_relative_to(d) for d in self.template_dirs):
            return True
        try:
            inside = real.relative_to(_resolved(self.root)).parts[:-1]
        except ValueError:
            inside = ()
        text = data.decode("utf-8", "replace")
        if any(part.lower() in TEMPLATE_DIRS for part in inside) and "<html" not in text[:4096].lower():
            return True  # a partial or an override in a template folder (a saved web page starts with <html>)
        return bool(_JINJA_LINE_RE.search(_PRE_RE.sub("", text)))


@dataclass
class PageContext:
    """What the Markdown reader knows about the page it reads, and what it found to report."""

    page: Path | None = None
    site: Site | None = None
    api_docstrings: bool = False  # fill mkdocstrings ``:::`` blocks from the installed package's docstrings
    max_bytes: int = 64 * 1024 * 1024
    encodings: Sequence[str] = ("cp1252",)
    warnings: list[str] = field(default_factory=list)
    left_out: Counter[str] = field(default_factory=Counter)
    includes: list[Path] = field(default_factory=list)  # files a MyST ``{include}`` is reading, outermost first

    @property
    def name(self) -> str:
        """The page's file name, for warnings."""
        return self.page.name if self.page is not None else "the page"

    def warn(self, message: str) -> None:
        """Record a warning once."""
        if message not in self.warnings:
            self.warnings.append(message)


def _resolved(path: Path) -> Path:
    try:
        return path.resolve()
    except (OSError, RuntimeError):
        return path.absolute()


def file_title(rel: str, site_name: str = "") -> str:
    """The title a page gets from its file name: the stem; for ``index``/``README`` its folder (or the site)."""
    path = Path(rel)
    if path.stem.lower() in ("index", "readme", "_index"):
        if len(path.parts) > 1:
            return path.parent.name
        return site_name or path.stem
    return path.stem


# --------------------------------------------------------------------------- mkdocs.yml


def _yaml_loader() -> Any:
    """A safe YAML loader that reads unknown tags (``!ENV``, ``!!python/name:...``) as plain values."""
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    def plain(loader: Any, suffix: str, node: Any) -> Any:
        if isinstance(node, yaml.ScalarNode):
            return loader.construct_scalar(node)
        if isinstance(node, yaml.SequenceNode):
            return loader.construct_sequence(node, deep=True)
        return loader.construct_mapping(node, deep=True)

    def env(loader: Any, node: Any) -> Any:  # MkDocs' ``!ENV NAME`` / ``!ENV [NAME, ..., default]``
        names = [loader.construct_scalar(node)] if isinstance(node, yaml.ScalarNode) else plain(loader, "", node)
        found = next((os.environ[str(n)] for n in names[:-1] if str(n) in os.environ), None)
        if found is None and len(names) == 1:
            found = os.environ.get(str(names[0]))
        return found if found is not None or len(names) == 1 else names[-1]

    Loader.add_constructor("!ENV", env)
    Loader.add_multi_constructor("!", plain)
    Loader.add_multi_constructor("tag:yaml.org,2002:python/", plain)
    return Loader


def read_mkdocs_config(path: Path) -> dict[str, Any]:
    """The mapping of ``mkdocs.yml``; ValueError (one line) when it cannot be read."""
    try:
        import yaml
    except ImportError as exc:  # pragma: no cover - PyYAML comes with transformers
        raise ValueError("reading it needs PyYAML: pip install pyyaml") from exc
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=_yaml_loader())
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ValueError(f"cannot read it ({first})") from exc
    if not isinstance(data, dict):
        raise ValueError("it is not a YAML mapping")
    return data


def _find_mkdocs(root: Path) -> tuple[Path, Path] | None:
    """The ``mkdocs.yml`` whose docs folder holds ``root`` or lies inside it, and that docs folder."""
    folder = _resolved(root if root.is_dir() else root.parent)
    for base in (folder, *list(folder.parents)[:2]):
        for name in MKDOCS_FILES:
            config = base / name
            if not config.is_file():
                continue
            docs_dir = _docs_dir(config)
            if folder.is_relative_to(docs_dir) or docs_dir.is_relative_to(folder):
                return config, docs_dir
    return None


def _docs_dir(config: Path) -> Path:
    """The ``docs_dir`` of a config, read cheaply (a line ``docs_dir: name``; default ``docs``)."""
    try:
        text = config.read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""
    m = re.search(r"^docs_dir:[ \t]*['\"]?([^'\"\n#]+?)['\"]?[ \t]*(?:#.*)?$", text, re.M)
    return _resolved(config.parent / (m.group(1) if m else "docs"))


def _nav_titles(nav: Any, docs_dir: Path, out: dict[str, str]) -> None:
    """Collect ``{page: label}`` from a ``nav`` list (nested sections included; URLs and bare pages skipped)."""
    if not isinstance(nav, list):
        return
    for item in nav:
        if not isinstance(item, dict):
            continue
        for label, value in item.items():
            if isinstance(value, str) and "://" not in value and not value.startswith(("mailto:", "#")):
                out.setdefault(str(_resolved(docs_dir / value)), str(label).strip())
            elif isinstance(value, list):
                _nav_titles(value, docs_dir, out)


def _extension_options(config: dict[str, Any], name: str) -> dict[str, Any] | None:
    """The options of Markdown extension ``name`` in ``markdown_extensions`` (None when it is not listed)."""
    exts = config.get("markdown_extensions") or []
    for ext in exts if isinstance(exts, list) else [exts]:
        if ext == name:
            return {}
        if isinstance(ext, dict) and name in ext:
            value = ext[name]
            return dict(value) if isinstance(value, dict) else {}
    return None


def _listed_names(config: dict[str, Any], key: str) -> set[str]:
    """The names listed under ``key`` of mkdocs.yml (``markdown_extensions``, ``plugins``): a string each, or a
    mapping from the name to its options."""
    listed = config.get(key) or []
    names: set[str] = set()
    for entry in listed if isinstance(listed, list) else [listed]:
        if isinstance(entry, str):
            names.add(entry)
        elif isinstance(entry, dict):
            names.update(str(k) for k in entry)
    return names


def _auto_append(site: Site, names: Any, config_path: Path) -> None:
    """The pymdownx.snippets ``auto_append`` files, found as snippets are; one warning for each that is missing."""
    for name in names if isinstance(names, list) else [names] if isinstance(names, str) else []:
        found = next((b / str(name) for b in site.snippet_bases if (b / str(name)).is_file()), None)
        if found is None:
            site.warnings.append(
                f"pymdownx.snippets auto_append file not found, left out of every page: {name} "
                f"(looked for under {', '.join(str(b) for b in site.snippet_bases)})"
            )
        else:
            site.auto_append.append(_resolved(found))


def _apply_mkdocs(site: Site, config_path: Path, docs_dir: Path) -> None:
    try:
        config = read_mkdocs_config(config_path)
    except ValueError as exc:
        site.warnings.append(f"{config_path} not used for page titles and snippets: {exc}")
        return
    site.config, site.docs_dir = config_path, docs_dir
    site.config_files.add(str(_resolved(config_path)))
    _nav_titles(config.get("nav"), docs_dir, site.titles)
    base = config_path.parent
    snippets = _extension_options(config, "pymdownx.snippets") or {}
    paths = snippets.get("base_path", ["."])
    site.snippet_bases = [_resolved(base / str(p)) for p in (paths if isinstance(paths, list) else [paths])]
    site.restrict_snippets = bool(snippets.get("restrict_base_path", True))
    _auto_append(site, snippets.get("auto_append"), config_path)
    site.markdown_extensions = _listed_names(config, "markdown_extensions")
    theme = config.get("theme")
    if isinstance(theme, dict) and isinstance(theme.get("custom_dir"), str):
        site.template_dirs.append(_resolved(base / theme["custom_dir"]))
    site.site_name = str(config.get("site_name") or "")
    site.macros_plugin = "macros" in _listed_names(config, "plugins")
    extra = config.get("extra")
    scalars = {k: v for k, v in (extra.items() if isinstance(extra, dict) else []) if isinstance(v, (str, int, float))}
    for key, value in scalars.items():
        for name in (key, f"extra.{key}", f"config.extra.{key}"):
            site.variables[name] = str(value)
    for key in ("site_name", "site_url", "repo_url", "repo_name", "site_author", "copyright"):
        if isinstance(config.get(key), str):
            site.variables[f"config.{key}"] = config[key]


# --------------------------------------------------------------------------- Sphinx toctree


def _source_root(root: Path) -> Path:
    """The Sphinx source folder: the nearest folder holding ``conf.py`` at or above ``root``, else ``root``."""
    folder = _resolved(root if root.is_dir() else root.parent)
    for base in (folder, *list(folder.parents)[:2]):
        if (base / "conf.py").is_file():
            return base
    return folder


def toctree_entries(text: str) -> list[tuple[str, str]]:
    """``(title, target)`` of the toctree entries with an explicit title in a reST or MyST page."""
    bodies = [m.group(2) for m in _TOCTREE_RST.finditer(text)]
    bodies += [m.group(2) for m in _TOCTREE_MYST.finditer(text)]
    out: list[tuple[str, str]] = []
    for body in bodies:
        for line in body.split("\n"):
            entry = line.strip()
            if not entry or entry.startswith(":") or entry == "---":
                continue
            m = _ENTRY_RE.match(entry)
            if m and "://" not in m.group(2) and m.group(2).strip() != "self":
                out.append((m.group(1).strip(), m.group(2).strip()))
    return out


def _toctree_titles(site: Site, files: list[Path]) -> None:
    from ragrade.corpus.sphinx import first_title, read_conf, scan_labels

    src = _source_root(site.root)
    sphinx = (src / "conf.py").is_file()
    if sphinx:
        site.config_files.add(str(src / "conf.py"))
        site.substitutions, site.rst_epilog = read_conf(src / "conf.py")  # a page using what it lacks warns
    for page in files:
        ext = page.suffix.lower()
        if ext not in _SCANNED or (ext == ".txt" and not sphinx):  # .txt sources only in a Sphinx project
            continue
        try:
            text = page.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        markdown = ext in (".md", ".markdown")
        if (markdown and ")=" in text) or (not markdown and ".. _" in text):
            scan_labels(text, markdown, site.labels)
        if sphinx and (title := first_title(text, markdown)):
            site.doc_titles.setdefault(str(_resolved(page))[: -len(ext) or None], title)
        if "toctree" not in text:
            continue
        for title, target in toctree_entries(text + "\n"):
            base = src if target.startswith("/") else page.parent
            path = _resolved(base / target.lstrip("/"))
            for ext in _DOC_EXTS:
                if ext and path.suffix.lower() == ext:
                    path = path.with_suffix("")
            site.titles.setdefault(str(path), title)


def discover_site(root: Path, files: list[Path] | None = None) -> Site:
    """What the site around ``root`` says about its pages (``files``: the pages to scan for toctrees)."""
    site = Site(root=root if root.is_dir() else root.parent)
    found = _find_mkdocs(root)
    if found is not None:
        _apply_mkdocs(site, *found)
    if not site.snippet_bases:  # no mkdocs.yml: the loaded folder and the folder above it (the project)
        folder = _resolved(site.root)
        site.snippet_bases = [folder, folder.parent]
    _toctree_titles(site, _sphinx_pages(site.root) or files or [])
    return site


def _sphinx_pages(root: Path) -> list[Path]:
    """The source pages of the Sphinx project above ``root`` (its toctrees may title pages under ``root``).

    Empty when ``root`` is not inside a Sphinx source folder other than itself; at most
    :data:`_MAX_SCANNED` files, hidden folders and ``_build`` skipped.
    """
    folder = _resolved(root)
    src = _source_root(root)
    if src == folder or not (src / "conf.py").is_file():
        return []
    out: list[Path] = []
    for path in sorted(src.rglob("*")):
        parts = path.relative_to(src).parts
        if any(p.startswith(".") or p == "_build" for p in parts) or path.suffix.lower() not in _SCANNED:
            continue
        out.append(path)
        if len(out) >= _MAX_SCANNED:
            break
    return out


__all__ = [
    "MKDOCS_FILES",
    "PageContext",
    "Site",
    "discover_site",
    "file_title",
    "read_mkdocs_config",
    "toctree_entries",
]
