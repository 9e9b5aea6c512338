"""`python -m suite`: the command line (suite.cli)."""

from suite.cli import main

raise SystemExit(main())
