"""One rule for the paths in a config file: relative to the folder of the file that names them.

Every config file ragrade reads (a ``ragrade run`` job config, a ``sweep.toml`` for ``exam take --config``)
resolves its path fields here, so ``out = "../runs/job"`` and ``paths = ["../docs"]`` in the same file mean
folders next to each other whatever the current directory. Paths given as command-line flags stay relative to
the current directory (they are never passed through these functions).

Model specs count as paths when they name a file: ``llamacpp/./q4.gguf``, ``hf/../models/x``,
``llamacpp/models/q4.gguf`` (a ``.gguf`` file), ``st:./my-model`` (an embedder), and the same inside
``replay/...``; hub ids (``hf/org/name``), server models (``openai/...``) and built-in names
(``llamacpp/gemma-3-270m``, ``minilm``) are left as they are.
"""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

from ragrade.errors import ConfigError

V = TypeVar("V")

_LOCAL = ("./", "../", ".\\", "..\\")


def resolve_path(value: V, base: Path) -> V | str:
    """``value`` made absolute against ``base`` when it is a relative path string (``~`` expanded first)."""
    if not isinstance(value, str) or not value or "://" in value:
        return value
    try:
        path = Path(value).expanduser()
    except RuntimeError as exc:  # ``~name`` of a user this machine does not know
        raise ConfigError(f"cannot expand '{value}': {exc} (no such user here?)") from exc
    return str(path if path.is_absolute() else (base / path).resolve())


def resolve_llm_spec(spec: V, base: Path) -> V | str:
    """An LLM spec whose model is a local path (``./``, ``../``, ``~`` or a ``.gguf`` file) made absolute."""
    if not isinstance(spec, str):
        return spec
    if spec.startswith("replay/"):
        return "replay/" + str(resolve_llm_spec(spec[len("replay/") :], base))
    provider, sep, model = spec.partition("/")
    if not sep or not model or not provider.replace("-", "").replace("_", "").isalnum():
        return spec  # no provider (``./m.gguf`` is not a spec: left for the validator to refuse)
    if model.startswith((*_LOCAL, "~")) or (model.lower().endswith(".gguf") and not Path(model).is_absolute()):
        return f"{provider}/{resolve_path(model, base)}"
    return spec


def resolve_embedder_spec(spec: V, base: Path) -> V | str:
    """``st:./model`` / ``st:../model`` / ``st:~/model`` made absolute; other embedder names unchanged."""
    if not isinstance(spec, str) or not spec.startswith("st:"):
        return spec
    model = spec[3:]
    return f"st:{resolve_path(model, base)}" if model.startswith((*_LOCAL, "~")) else spec


def resolve_keys(table: object, keys: tuple[str, ...], base: Path, *, llm: bool = False) -> None:
    """Resolve ``table[key]`` (a string or a list of strings) in place for each key present."""
    if not isinstance(table, dict):
        return
    fix = resolve_llm_spec if llm else resolve_path
    for key in keys:
        value = table.get(key)
        if isinstance(value, list):
            table[key] = [fix(v, base) for v in value]
        elif value:
            table[key] = fix(value, base)


def resolve_section(
    table: V,
    config: str | Path,
    *,
    paths: tuple[str, ...] = (),
    llms: tuple[str, ...] = (),
    maps: tuple[str, ...] = (),
    embedders: tuple[str, ...] = (),
) -> V:
    """``table`` (a config file's table, changed in place and returned) with its path fields resolved.

    ``config`` is the file the table was read from; ``paths`` name path fields, ``llms`` LLM specs,
    ``maps`` tables of name -> file (e.g. ``prompts``) and ``embedders`` embedder specs.
    """
    if not isinstance(table, dict):
        return table
    base = Path(config).resolve().parent
    resolve_keys(table, paths, base)
    resolve_keys(table, llms, base, llm=True)
    for key in maps:
        if isinstance(table.get(key), dict):
            resolve_keys(table[key], tuple(table[key]), base)
    for key in embedders:
        if key in table:
            table[key] = resolve_embedder_spec(table[key], base)
    return table


__all__ = ["resolve_embedder_spec", "resolve_keys", "resolve_llm_spec", "resolve_path", "resolve_section"]
