"""`suite score-code`: model-written programs scored in the sandbox."""

from __future__ import annotations

import json

from suite.runtime.errors import EXIT_OK


def cmd_score_code(args) -> int:
    from suite.stages.evaluate.sandbox.score import score_file

    ks = [int(k) for k in args.k.split(",") if k.strip()] if args.k else None
    result = score_file(args.samples, args.problems, allow=args.allow_code_execution, mode=args.sandbox,
                        timeout_s=args.timeout, ks=ks, workers=args.workers)
    print(json.dumps(result, ensure_ascii=False))
    return EXIT_OK
