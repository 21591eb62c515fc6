"""What the API's modules share: the path type and the settings layer a settings object gives."""

from __future__ import annotations

from pathlib import Path
from typing import Any

PathLike = str | Path


def settings_layer(config: Any) -> dict[str, Any]:
    """The fields a settings object was given (the keyword settings go over them)."""
    if config is None:
        return {}
    layer: dict[str, Any] = config.model_dump(exclude_unset=True)
    return layer
