"""`suite summarize RUN_DIR`: a run folder's summary.json and report made again from its records, running no stage."""

from __future__ import annotations

from pathlib import Path

from suite.analysis.derive import archive_notes
from suite.orchestrate.summarize import rebuild
from suite.runtime.errors import EXIT_OK
from suite.runtime.lock import refuse_live


def cmd_summarize(args) -> int:
    refuse_live(Path(args.run), "`suite summarize`")  # a live run writes its own summary.json and report.html
    summary = rebuild(Path(args.run))
    bad = [v.name for v in summary.variants if v.errors]
    print(f"{summary.run_dir}/summary.json: {len(summary.variants)} variant(s)"
          + (f", with errors: {', '.join(bad)}" if bad else ""))
    for note in archive_notes(summary):
        print(note)
    return EXIT_OK
