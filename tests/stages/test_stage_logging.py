"""The stage process's logging (suite/stages/__main__.py setup_logging): one handler on the ``suite`` logger, each
line with the time and the stage's name; other libraries' loggers are left alone, and the lines never read as the
error line of a failed stage's log (suite.runtime.procs.error_line)."""

from __future__ import annotations

import io
import logging
import re

from suite.runtime.procs import error_line
from suite.stages.__main__ import setup_logging


def test_stage_modules_log_with_time_and_stage_name():
    out = io.StringIO()
    handler = setup_logging("quantize", stream=out)
    try:
        setup_logging("quantize", stream=out)  # set up twice: still one handler
        logging.getLogger("suite.stages.quantize.stage").info("checkpoint %s written", "/ck")
        logging.getLogger("vllm.some.module").warning("not ours")
        lines = out.getvalue().splitlines()
        assert len(lines) == 1
        assert re.fullmatch(r"\d\d:\d\d:\d\d quantize INFO suite\.stages\.quantize\.stage: checkpoint /ck written",
                            lines[0])
        assert error_line(out.getvalue()) is None
        assert sum(getattr(h, "suite_stage_handler", False) for h in logging.getLogger("suite").handlers) == 1
    finally:
        logger = logging.getLogger("suite")
        for h in [h for h in logger.handlers if getattr(h, "suite_stage_handler", False)]:
            logger.removeHandler(h)
        logger.propagate = True
        logger.setLevel(logging.NOTSET)
        assert handler is not None
