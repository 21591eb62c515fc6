"""The main job: every stage in order from one config file (``ragrade run``, ``ragrade demo``)."""
