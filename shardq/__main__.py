"""``python -m shardq``: the same as the ``shardq`` command."""

import sys

from shardq.cli import main

sys.exit(main())
