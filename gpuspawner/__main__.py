"""``python -m gpuspawner``: the same command line as ``gpuspawner``."""

from gpuspawner.cli import main

raise SystemExit(main())
