"""``python -m pytest_tileconform``: the ``tileconform`` command."""

import sys

from .commands.cli import main

sys.exit(main())
