"""python -m semboard_cli."""

from semboard_cli.main import main

raise SystemExit(main())
