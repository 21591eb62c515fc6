"""``python -m ragrade``."""

from ragrade.cli.main import run

run()
