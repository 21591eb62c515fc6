"""The robustness testbeds, registered under kind ``testbed`` (names equal the ``--testbed`` strings).

One module per testbed; adding one is one file (a :class:`BaseTestbed` subclass registered with
``@register("testbed", NAME)``) and one import line here.
"""

from __future__ import annotations

from ragrade.robust.testbeds import counterfactual, integration, negative, noise  # noqa: F401  (registration)
from ragrade.robust.testbeds.base import BaseTestbed, Testbed, get_testbed, testbed_names

TESTBEDS = ("noise", "negative", "integration", "counterfactual")  # the built-in ones, in the paper's order

__all__ = ["TESTBEDS", "BaseTestbed", "Testbed", "get_testbed", "testbed_names"]
