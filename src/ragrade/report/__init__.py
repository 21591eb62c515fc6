"""The report stage: a self-contained HTML report rendered from a run directory (``ragrade report``)."""
