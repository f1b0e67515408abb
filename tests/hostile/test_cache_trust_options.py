"""The build cache's trust options (--tile-cache-trust, --tile-cache-signing-key,
--tile-cache-verify-key) are checked when pytest starts: a bad value is one usage error; a good
one reaches every build of the session through the environment the cache reads."""

from __future__ import annotations

from pathlib import Path

import pytest

SMOKE = Path(__file__).resolve().parents[2] / "matrices" / "smoke-sm90.yaml"


@pytest.fixture
def matrix(pytester: pytest.Pytester) -> Path:
    path = pytester.path / SMOKE.name
    path.write_text(SMOKE.read_text())
    return path


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--tile-cache-trust", "everyone"], "is owner, group:NAME or any, not 'everyone'"),
        (["--tile-cache-trust", "group:no-such-group-tc"], "no group 'no-such-group-tc'"),
        (["--tile-cache-signing-key", "missing.pem"], "--tile-cache-signing-key missing.pem: no such file"),
        (["--tile-cache-verify-key", "missing.pub"], "--tile-cache-verify-key missing.pub: no such file"),
    ],
)
def test_a_bad_trust_option_is_one_usage_error(
    pytester: pytest.Pytester, matrix: Path, args: list[str], message: str
) -> None:
    result = pytester.runpytest_subprocess("--tile-matrix", str(matrix), "-p", "no:xdist", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.stderr.lines if line.startswith("ERROR")]
    assert len(errors) == 1 and message in errors[0]
    assert "Traceback" not in result.stderr.str()


def test_a_trust_option_reaches_the_cache(pytester: pytest.Pytester, matrix: Path) -> None:
    pytester.makeconftest(
        """
import os
def pytest_collection_finish(session):
    print("TRUST=" + os.environ.get("TILECONFORM_CACHE_TRUST", "unset"))
"""
    )
    result = pytester.runpytest_subprocess(
        "--tile-matrix", str(matrix), "-p", "no:xdist", "--collect-only", "-s", "--tile-cache-trust", "any"
    )
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["TRUST=any"])


@pytest.mark.parametrize(
    ("option", "mode", "message"),
    [
        ("--tile-cache-verify-key", 0o666, "cache verify key {key} is writable by every user (mode)"),
        ("--tile-cache-signing-key", 0o622, "cache signing key {key} is writable by every user (mode)"),
        ("--tile-cache-verify-key", 0o644, "cache verify key {key}: "),  # not a key: checked at start too
        (
            "--tile-cache-signing-key",
            0o644,
            "cache signing key {key} is readable by every user (mode), who could then sign cache "
            "entries: refused (chmod 600 {key})",
        ),
    ],
)
def test_a_key_file_that_cannot_be_trusted_is_one_usage_error(
    pytester: pytest.Pytester, matrix: Path, option: str, mode: int, message: str
) -> None:
    """Refused when pytest starts, before any entry is read or signed with it."""
    key = pytester.path / "cache.pem"
    key.write_text("not a key\n")
    key.chmod(mode)
    result = pytester.runpytest_subprocess(
        "--tile-matrix", str(matrix), "-p", "no:xdist", "--collect-only", option, str(key)
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str() + result.stderr.str()
    errors = [line for line in result.stderr.lines if line.startswith("ERROR")]
    assert len(errors) == 1 and message.format(key=key) in errors[0], errors
