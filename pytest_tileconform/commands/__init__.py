"""The ``tileconform`` command line: the parser and the core's ``report`` commands in :mod:`.cli`;
a backend's plugin adds its own commands (:mod:`.plugins`)."""
