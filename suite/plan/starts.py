"""How many vLLM engine starts a plan will make: each job's config says (its ``engine_starts()``: (least, most)), and
an evaluation the store already holds makes none (``held``, which the caller answers from the evaluation cache).

``suite plan`` prints ``starts_line``; the run's start-up ledger (summary.json ``engine_starts``) lists the starts it
made, which a test holds equal to the plan's count on the CPU demo.
"""

from __future__ import annotations

from typing import Callable


def planned_starts(plan, held: Callable[[str, object], bool | None] = lambda stage, vp: False) -> list[dict]:
    """One row per job that starts an engine: variant, stage, least, most, and ``reused`` (True: the store holds its
    result, no start; None: not known before its prerequisite runs, e.g. a checkpoint not built yet)."""
    by_name = {vp.variant.name: vp for vp in plan.variants}
    rows = []
    for stage, name in plan.jobs():
        config = by_name[name].config(stage)
        count = getattr(config, "engine_starts", None)
        if count is None or count()[1] == 0:
            continue
        least, most = count()
        reused = held(stage, by_name[name])
        if reused:
            least = most = 0
        rows.append({"variant": name, "stage": stage, "least": least, "most": most, "reused": reused})
    return rows


def starts_line(rows: list[dict]) -> str:
    """``engine starts: N (variant stage n, ...)``, with a range where API-server rounds may add servers and what the
    store holds or may hold."""
    least, most = sum(r["least"] for r in rows), sum(r["most"] for r in rows)
    parts = [f"{r['variant']} {r['stage']} " + ("reused from the store" if r["reused"] else
                                                 f"{r['least']}" if r["least"] == r["most"] else
                                                 f"{r['least']}-{r['most']}") for r in rows]
    unknown = sum(r["reused"] is None for r in rows)
    note = (f"; {unknown} evaluation(s) may still be reused from the store: their keys are known once their "
            "checkpoints exist") if unknown else ""
    total = f"{least}" if least == most else f"{least} to {most}"
    return f"engine starts: {total} ({', '.join(parts) or 'none'}{note})"
