"""The FlashInfer backend with a remote tier, as users run it (pytester, the stand-in FlashInfer
and compiler of helpers.stand_in_flashinfer): one run compiles the matrix into the remote tier,
a second with an empty local cache judges it with no compile, and says where its units come
from."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.stand_in_flashinfer import QUIET

pytest.importorskip("fsspec")


def compiles(cache: Path) -> int:
    log = cache / "compiles.log"
    return len(log.read_text().split()) if log.exists() else 0


def outcomes(result: pytest.RunResult) -> list[str]:
    """Each case's outcome line (-rA), without its reason."""
    return [
        line.split(" - ")[0] for line in result.outlines if line.startswith(("PASSED", "SKIPPED", "UNRUN"))
    ]


def test_a_fresh_cache_judges_from_the_remote_tier_with_no_compile(
    host: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    remote = (host.path / "remote").as_uri()
    args = (
        "--tile-matrix",
        "m.yaml",
        "--tile-device",
        "compile",
        "--tile-cache-remote",
        remote,
        "-rA",
        *QUIET,
    )
    first = host.runpytest(*args)
    assert first.ret == pytest.ExitCode.OK, first.stdout.str()
    assert compiles(host.path / "cache") == 1  # the three cases in one shared unit
    monkeypatch.setenv("TILECONFORM_CACHE_DIR", str(host.path / "judge"))
    second = host.runpytest(*args)
    assert second.ret == pytest.ExitCode.OK, second.stdout.str()
    assert compiles(host.path / "judge") == 0 and compiles(host.path / "cache") == 1
    judged = [outcomes(first), outcomes(second)]
    assert len(judged[0]) == 3 and judged[0] == judged[1]
    header = next(line for line in second.outlines if "build cache" in line)
    assert f"build cache {host.path / 'judge'} before the remote tier {remote}: 0 of 3" in header
