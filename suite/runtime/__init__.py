"""Runtime helpers for the parent and the stage processes alike: processes, the run lock, interpreters and their probes, settings, errors (the ground floor: imports only suite.records)."""
