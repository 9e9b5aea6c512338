"""The plan: a validated recipe -> the stage jobs of one run (``planner``), and every content key (``keys``)."""
