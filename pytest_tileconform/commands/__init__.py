"""The ``tileconform`` command line: one module per command, the parser in :mod:`.cli`."""
