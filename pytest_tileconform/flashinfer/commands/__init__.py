"""The FlashInfer wing's ``tileconform`` commands: one module per command, added in :mod:`.cli`."""
