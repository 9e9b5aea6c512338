from suite.cli import main

raise SystemExit(main())
