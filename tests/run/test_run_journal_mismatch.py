from __future__ import annotations

import pytest

from ragrade.errors import ConfigError
from ragrade.run.store import Journal, JournalMismatch


def test_other_fingerprint_or_spec_raises_journal_mismatch(tmp_path):
    j = Journal(tmp_path / "journal.sqlite")
    j.check_fingerprint("aaa")
    j.check_fingerprint("aaa")  # same inputs: resumable
    j.register_pipelines({"p1": {"k": 3}})
    j.register_pipelines({"p1": {"k": 3}})
    with pytest.raises(JournalMismatch, match="--overwrite"):
        j.check_fingerprint("bbb")
    with pytest.raises(JournalMismatch) as info:
        j.register_pipelines({"p1": {"k": 5}})
    assert isinstance(info.value, ConfigError)  # still a user error: one line, exit 2
