"""Narrowing helpers for tests that read untyped JSON-like values (``dict[str, object]``, parsed JSON)."""

from __future__ import annotations

from typing import TypeVar

T = TypeVar("T")


def as_dict(value: object) -> dict[str, object]:
    """``value`` as a dict with string keys; fails the test when it is not one."""
    assert isinstance(value, dict), f"expected a dict, got {type(value).__name__}: {value!r}"
    return value


def as_list(value: object) -> list[object]:
    """``value`` as a list; fails the test when it is not one."""
    assert isinstance(value, list), f"expected a list, got {type(value).__name__}: {value!r}"
    return value


def dig(value: object, *keys: str | int) -> object:
    """The value at ``keys`` in nested dicts and lists (``dig(doc, "a", 0, "b")`` is ``doc["a"][0]["b"]``)."""
    for key in keys:
        if isinstance(key, int):
            value = as_list(value)[key]
        else:
            value = as_dict(value)[key]
    return value


def some(value: T | None) -> T:
    """``value``, which must not be None (fails the test when it is)."""
    assert value is not None
    return value


def narrow(value: object, kind: type[T]) -> T:
    """``value`` as an instance of ``kind`` (fails the test when it is not one)."""
    assert isinstance(value, kind), f"expected {kind.__name__}, got {type(value).__name__}"
    return value
