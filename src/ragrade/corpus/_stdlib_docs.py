"""Collect the docstrings of the standard library: run in a separate, isolated interpreter.

``python -I -S _stdlib_docs.py OUT.json`` imports the standard library's
modules (never site-packages: ``-S``; no user environment: ``-I``), so that
neither third-party monkey-patching in the calling process nor the imports'
own side effects can change or leak into the result. This file uses only the
standard library. It writes ``{"modules": [...], "failures": [...],
"objects": [[module, qualified name, kind, raw text], ...]}``.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import io
import json
import os
import pkgutil
import sys
import sysconfig
import warnings
from types import ModuleType
from typing import Any

# never imported: side effects (browser, printing, GUI, writing files, terminal state) or test suites
BLOCKED = frozenset(
    {
        "antigravity",
        "this",
        "tkinter",
        "turtle",
        "turtledemo",
        "idlelib",
        "test",
        "__main__",
        "__hello__",
        "__phello__",
        "readline",
        "rlcompleter",
        "lib2to3",
        "ensurepip",
        "distutils",
        "pydoc_data",
        "xxlimited",
        "xxlimited_35",
        "xxsubtype",
        "msilib",
        "winreg",
        "winsound",
        "msvcrt",
        "nt",
        "_winapi",
        "encodings",
        "sre_compile",
        "sre_constants",
        "sre_parse",
        "pty",
        "tty",
        "getpass",
        "webbrowser",
        "venv",
        "site",
        "sitecustomize",
        "usercustomize",
    }
)
_BLOCKED_PARTS = frozenset({"test", "tests", "idle_test", "__main__", "_test", "testing"})


def _stdlib_dirs() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    return tuple(os.path.realpath(p) for p in {paths["stdlib"], paths["platstdlib"]})


def _is_stdlib(mod: ModuleType, roots: tuple[str, ...]) -> bool:
    path = getattr(mod, "__file__", None)
    if path is None:  # built into the interpreter
        return True
    real = os.path.realpath(path)
    return any(real.startswith(r + os.sep) for r in roots) and "site-packages" not in real


def _blocked(name: str) -> bool:
    parts = name.split(".")
    return parts[0] in BLOCKED or any(p.startswith("_") or p in _BLOCKED_PARTS for p in parts)


def _import(name: str, failures: list[tuple[str, str]]) -> ModuleType | None:
    sink = io.StringIO()
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            warnings.simplefilter("ignore")
            return importlib.import_module(name)
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):
            raise
        failures.append((name, f"{type(exc).__name__}: {exc}"[:200]))
        return None


def module_names(failures: list[tuple[str, str]]) -> list[str]:
    """Sorted names of the importable, documented standard-library modules (imports them)."""
    roots = _stdlib_dirs()
    found: set[str] = set()
    for top in sorted(sys.stdlib_module_names):
        if _blocked(top):
            continue
        mod = _import(top, failures)
        if mod is None or not _is_stdlib(mod, roots):
            continue
        found.add(top)
        for info in pkgutil.walk_packages(
            getattr(mod, "__path__", []) or [], prefix=f"{top}.", onerror=lambda _name: None
        ):
            if _blocked(info.name):
                continue
            sub = _import(info.name, failures)
            if sub is not None and _is_stdlib(sub, roots):
                found.add(info.name)
    return sorted(found)


class _Elided:
    """Stands for a default value that is not a plain literal (its repr may hold addresses or secrets)."""

    def __repr__(self) -> str:
        return "..."


_ELIDED = _Elided()


def _plain(value: Any, depth: int = 0) -> bool:
    if value is None or isinstance(value, (bool, int, float, complex)):
        return True
    if isinstance(value, (str, bytes)):
        return len(value) <= 40
    if isinstance(value, (tuple, frozenset)) and depth == 0:
        return len(value) <= 6 and all(_plain(v, 1) for v in value)
    return False


def _signature(obj: Any) -> str:
    """The call signature without annotations; non-literal defaults (e.g. ``os.environ``) shown as ``...``."""
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return ""
    params = []
    for p in sig.parameters.values():
        if p.default is not p.empty and not _plain(p.default):
            p = p.replace(default=_ELIDED)
        params.append(p.replace(annotation=p.empty))
    return str(sig.replace(parameters=params, return_annotation=sig.empty))


def _own_doc(obj: Any) -> str:
    doc = obj.__doc__ if isinstance(getattr(obj, "__doc__", None), str) else ""
    return inspect.cleandoc(doc) if doc else ""


def _class_text(cls: type, qual: str) -> str:
    parts = [f"class {qual}{_signature(cls)}", _own_doc(cls)]
    for name, member in sorted(vars(cls).items()):
        if name.startswith("_") and name != "__init__":
            continue
        func = member.__func__ if isinstance(member, (classmethod, staticmethod)) else member
        if isinstance(member, property):
            func = member.fget
        if not callable(func) and not isinstance(member, property):
            continue
        doc = _own_doc(func)
        if doc:
            parts.append(f"{qual}.{name}{_signature(func) if callable(func) else ''}\n{doc}")
    return "\n\n".join(p for p in parts if p)


def _objects(mod: ModuleType) -> list[tuple[str, str, str]]:
    """``(qualified name, kind, raw text)`` for the module and its public classes and functions."""
    name = mod.__name__
    out = []
    doc = _own_doc(mod)
    if doc:
        out.append((name, "module", f"module {name}\n\n{doc}"))
    public = getattr(mod, "__all__", None)
    for attr, obj in sorted(vars(mod).items()):
        if attr.startswith("_") or (isinstance(public, (list, tuple)) and attr not in public):
            continue
        original = vars(mod).get(f"__{attr}__")  # sys.excepthook & co. may be replaced at run time
        if original is not None and callable(original):
            obj = original
        if getattr(obj, "__module__", None) != name:
            continue  # re-exported from elsewhere: documented where it is defined
        qual = f"{name}.{attr}"
        if inspect.isclass(obj):
            out.append((qual, "class", _class_text(obj, qual)))
        elif inspect.isfunction(obj) or inspect.isbuiltin(obj):
            fdoc = _own_doc(obj)
            if fdoc:
                out.append((qual, "function", f"{qual}{_signature(obj)}\n\n{fdoc}"))
    return out


def collect() -> dict[str, Any]:
    """Everything the demo corpus needs, as plain JSON-able data."""
    failures: list[tuple[str, str]] = []
    names = module_names(failures)
    objects: list[list[str]] = []
    for name in names:
        mod = sys.modules.get(name)
        if mod is not None:
            objects.extend([name, qual, kind, text] for qual, kind, text in _objects(mod))
    return {"modules": names, "failures": failures, "objects": objects}


def main(argv: list[str]) -> int:
    """Write :func:`collect`'s result to the file named by ``argv[0]``."""
    result = collect()
    with open(argv[0], "w", encoding="utf-8") as fh:
        json.dump(result, fh, ensure_ascii=False)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
