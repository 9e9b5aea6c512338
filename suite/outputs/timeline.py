"""timeline.png: where and when each job of a run ran (from the runner's jobs.json), one bar per job.

The engine starts of the start-up ledger (summary.json's ``engine_starts``) are drawn over their job's bar, hatched
and darker, cold starts in ``COLD`` and warm ones in ``WARM``, so that starting shows apart from measuring.

Each stage's colour is the registry's (``StageSpec.colour``), which the runner writes into jobs.json's ``stages``
(outputs never import the stages); a jobs.json written before that field draws every bar in ``OTHER``."""

from __future__ import annotations

from pathlib import Path

from suite.runtime import safeio

OTHER = "#999999"  # a stage jobs.json gives no colour
COLD, WARM = "#b2182b", "#252525"  # engine starts whose compile store was cold / warm (or not used)


def start_spans(jobs: list[dict], starts: list[dict], t0: float | None) -> list[tuple[int, float, float, str]]:
    """(row, from_s, seconds, colour) of each engine start with a clock, on the row of the job of its variant that
    was running when it began (seconds from the run's start ``t0``); none without ``t0`` (an older jobs.json)."""
    spans = []
    for s in starts if t0 is not None else []:
        if s.get("started_at") is None or not s.get("total_s"):
            continue
        at = s["started_at"] - t0
        row = next((i for i, j in enumerate(jobs) if j.get("variant") == s.get("variant")
                    and j["started_s"] - 1 <= at <= j["ended_s"]), None)
        if row is not None:
            spans.append((row, at, s["total_s"], COLD if s.get("compile_cache") == "cold" else WARM))
    return spans


def write(jobs_json: Path, out: Path, starts: list[dict] | None = None) -> Path | None:
    """Draw ``jobs.json``'s jobs against seconds from the run's start, labelled with their placement
    (GPU and share), and the engine ``starts`` (the ledger's rows) over them; None when there is no job to draw."""
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
    spans = start_spans(jobs, starts or [], data.get("t0"))
    for row, at, seconds, colour in spans:
        ax.barh(row, seconds, left=at, height=0.6, color=colour, alpha=0.55, hatch="//", edgecolor="white")
    if spans:
        from matplotlib.patches import Patch

        ax.legend(handles=[Patch(facecolor=COLD, hatch="//", label="engine start, cold compile store"),
                           Patch(facecolor=WARM, hatch="//", label="engine start, warm")],
                  fontsize=7, loc="lower right", bbox_to_anchor=(1.0, 1.0), ncol=2, frameon=False)
    ax.set_yticks(range(len(jobs)), [j["id"] for j in jobs], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("seconds from the run's start")
    wall = data.get("wall_s")
    ax.set_title(f"{data.get('executor', '')}: {len(jobs)} jobs" + (f", {wall / 60:.1f} min" if wall else ""),
                 fontsize=9, loc="left")  # the left: the ledger's legend is at the right
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)
    return out
