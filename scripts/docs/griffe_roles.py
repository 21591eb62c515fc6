"""A griffe extension (mkdocs.yml, mkdocstrings' ``extensions``): docstrings written with reST roles read as Markdown.

ragrade's docstrings name code as Sphinx does (``:func:`~ragrade.api.take_exam```, double backticks); the API
reference renders Markdown, where those would show as written. Each role becomes inline code of its last name,
each double-backtick span inline code.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":[a-z]+:`~?([^`]+)`")
_DOUBLE = re.compile(r"``([^`]+)``")


def markdown_docstring(text: str) -> str:
    """``text`` with reST roles and double-backtick spans as Markdown inline code."""
    text = _ROLE.sub(lambda m: f"`{m.group(1).rsplit('.', 1)[-1]}`", text)
    return _DOUBLE.sub(r"`\1`", text)


class ReSTRoles(griffe.Extension):
    """Rewrite every loaded object's docstring with :func:`markdown_docstring`."""

    def on_object(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        """Called by griffe for each object it loads."""
        if obj.docstring is not None:
            obj.docstring.value = markdown_docstring(obj.docstring.value)
