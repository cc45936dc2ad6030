"""``python -m shardq``: the same as the ``shardq`` command."""

import sys

from shardq.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
