"""Robustness testbeds (after the RGB benchmark): noise robustness, negative rejection,
information integration and counterfactual robustness, on RGB-shaped data or on
testbeds built from the user's own corpus.

Importing this package registers the four testbeds under kind ``testbed``.
"""

from ragrade.robust.testbeds import TESTBEDS, Testbed, get_testbed

__all__ = ["TESTBEDS", "Testbed", "get_testbed"]
