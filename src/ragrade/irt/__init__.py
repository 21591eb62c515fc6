"""The irt stage: 1PL/2PL/3PL and hierarchical item response models, information, exam improvement.

Heavy pieces (the numba kernel) are imported lazily; importing this package is cheap.
"""

from __future__ import annotations

from typing import Any

__all__ = ["FitConfig", "IRTResult", "fit_irt", "improve"]


def __getattr__(name: str) -> Any:
    if name in ("FitConfig", "fit_irt"):
        from ragrade.irt import fit

        return getattr(fit, name)
    if name == "IRTResult":
        from ragrade.irt.result import IRTResult

        return IRTResult
    if name == "improve":
        from ragrade.irt.improve import improve

        return improve
    raise AttributeError(name)
