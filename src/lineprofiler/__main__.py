"""``python -m lineprofiler``: the same as the ``lineprofiler`` command."""

from lineprofiler.cli import main

raise SystemExit(main())
