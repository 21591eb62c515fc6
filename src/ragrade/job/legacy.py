"""The old spellings of a job config's stage tables, read for one release with one deprecation line each.

Before each table embedded its stage's own settings, some keys had job-only names: ``[robust] llms`` and
``n`` (``robust run``'s ``llm`` and ``limit``), ``[judge] judge_llm`` (``judge``'s ``llm``), ``[irt] prior``
and ``groups`` (an IRT fit's ``priors`` and ``jackknife_groups``), and ``[exam] options = {...}``, whose keys
are now keys of ``[exam]`` itself. :func:`upgrade_job_layer` rewrites one layer of a job config (a file, the
Python API's mapping) to the current names before the layers merge, so a layer's key wins over a lower
layer's whatever its spelling; within one layer the old spelling wins (a base merged with a user's old keys).
"""

from __future__ import annotations

from collections.abc import Mapping

from ragrade.config import deprecated
from ragrade.errors import ConfigError

#: table -> old key -> current key
RENAMED: dict[str, dict[str, str]] = {
    "robust": {"llms": "llm", "n": "limit"},
    "judge": {"judge_llm": "llm"},
    "irt": {"prior": "priors", "groups": "jackknife_groups"},
}
#: table -> the old key whose table of keys now sits in the table itself
FLATTENED: dict[str, str] = {"exam": "options"}


def _warn(message: str) -> None:
    deprecated(f"{message} (the old spelling is read until the next release)")


def _upgrade_table(name: str, table: Mapping[str, object], where: str) -> dict[str, object]:
    out = dict(table)
    for old, new in RENAMED.get(name, {}).items():
        if old not in out:
            continue
        out[new] = out.pop(old)  # over the current name in the same layer (a base merged with old-style keys)
        _warn(f"{where}: [{name}] {old} is the old name of {new}; rename it")
    old_table = FLATTENED.get(name)
    if old_table is not None and old_table in out:
        nested = out.pop(old_table)
        if not isinstance(nested, Mapping):
            raise ConfigError(f"{where}: [{name}] {old_table} must be a table of settings, got {nested!r}")
        out.update({str(k): v for k, v in nested.items()})
        _warn(f"{where}: [{name}.{old_table}] is the old spelling; write its keys in [{name}] itself")
    return out


def upgrade_job_layer(data: object, where: str = "job config") -> object:
    """``data`` (one layer of a job config) with the old spellings of its stage tables renamed (see the module);
    anything else, and a layer without them, is returned as it is."""
    if not isinstance(data, Mapping):
        return data
    tables = set(RENAMED) | set(FLATTENED)
    if not any(isinstance(data.get(t), Mapping) for t in tables):
        return data
    out = dict(data)
    for name in tables:
        table = out.get(name)
        if isinstance(table, Mapping):
            out[name] = _upgrade_table(name, table, where)
    return out


__all__ = ["FLATTENED", "RENAMED", "upgrade_job_layer"]
