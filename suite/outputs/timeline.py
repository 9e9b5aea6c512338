"""timeline.png: where and when each job of a run ran (from the runner's jobs.json), one bar per job.

Each stage's colour is the registry's (``StageSpec.colour``), which the runner writes into jobs.json's ``stages``
(outputs never import the stages); a jobs.json written before that field draws every bar in ``OTHER``."""

from __future__ import annotations

from pathlib import Path

from suite.runtime import safeio

OTHER = "#999999"  # a stage jobs.json gives no colour


def write(jobs_json: Path, out: Path) -> Path | None:
    """Draw ``jobs.json``'s jobs against seconds from the run's start, labelled with their placement
    (GPU and share); None when there is no job to draw."""
    try:
        data = safeio.read_json(jobs_json, "record")
    except (OSError, ValueError):
        return None
    jobs = [j for j in data.get("jobs", []) if j.get("ended_s", 0) > j.get("started_s", 0)]
    if not jobs:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colours = {stage: d.get("colour", OTHER) for stage, d in (data.get("stages") or {}).items()}
    jobs.sort(key=lambda j: (j["started_s"], j["id"]))
    fig, ax = plt.subplots(figsize=(10, 0.45 * len(jobs) + 1.4), dpi=110)
    for i, j in enumerate(jobs):
        ax.barh(i, j["ended_s"] - j["started_s"], left=j["started_s"], height=0.6,
                color=colours.get(j["stage"], OTHER), alpha=0.6 if j.get("state") == "failed" else 1.0)
        ax.text(j["ended_s"], i, f"  {j['placement']}" + ("  FAILED" if j.get("state") == "failed" else ""),
                va="center", fontsize=7)
    ax.set_yticks(range(len(jobs)), [j["id"] for j in jobs], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("seconds from the run's start")
    wall = data.get("wall_s")
    ax.set_title(f"{data.get('executor', '')}: {len(jobs)} jobs" + (f", {wall / 60:.1f} min" if wall else ""),
                 fontsize=9)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)
    return out
