"""Hook specifications of the FlashInfer MoE plugin for the backends that read FlashInfer's sources
beside it, registered in its ``pytest_addhooks`` (and by :func:`.releases.installed_members` for
the command line)."""

from __future__ import annotations

import pytest


@pytest.hookspec
def pytest_tileconform_flashinfer_release_members() -> list[str]:  # type: ignore[empty-body]
    """Return what this plugin's backend reads of a FlashInfer wheel that ``--tile-flashinfer``
    names: paths inside the wheel, a folder ending in ``/``, a pattern with ``*``
    (:func:`.wheel.wanted`). A release is unpacked once for the union of every plugin's; an
    entry unpacked without some of them is unpacked again. Keep it cheap: a constant."""
