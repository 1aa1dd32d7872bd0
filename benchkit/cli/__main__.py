"""``python -m benchkit.cli``: the same as the `benchkit` command."""

import sys

from benchkit.cli import main

sys.exit(main())
