"""``python -m pytest_tileconform``: the ``tileconform`` command."""

import sys

from .cli import main

sys.exit(main())
