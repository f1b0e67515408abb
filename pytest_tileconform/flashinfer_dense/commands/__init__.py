"""The dense backend's part of the ``tileconform`` commands (``--dense``): :mod:`.cli`."""
