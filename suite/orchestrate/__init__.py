"""Running a plan: the job loop (``runner``), the one process supervisor (``procs``), the stage interpreters (``envs``)."""
