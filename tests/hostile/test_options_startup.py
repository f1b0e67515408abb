"""Every pytest option of the plugin is checked when pytest starts: a bad value is one usage
error (exit 4) that names the option or its ini key, never a failure of every case."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

SMOKE = Path(__file__).resolve().parents[2] / "matrices" / "smoke-sm90.yaml"

# (id, extra arguments, fragment of the one error); {tmp} is the test's folder
OPTIONS: list[tuple[str, list[str], str]] = [
    ("timeout-0", ["--tile-timeout", "0"], "--tile-timeout 0.0: must be a finite number of seconds above 0"),
    ("timeout-negative", ["--tile-timeout=-1"], "--tile-timeout -1.0: must be a finite"),
    ("timeout-nan", ["--tile-timeout", "nan"], "--tile-timeout nan: must be a finite"),
    ("timeout-inf", ["--tile-timeout", "inf"], "--tile-timeout inf: must be a finite"),
    ("timeout-word", ["--tile-timeout", "soon"], "invalid float value"),
    ("build-jobs-0", ["--tile-build-jobs", "0"], "--tile-build-jobs 0: must be at least 1"),
    ("build-jobs-negative", ["--tile-build-jobs=-1"], "--tile-build-jobs -1: must be at least 1"),
    ("build-jobs-word", ["--tile-build-jobs", "many"], "invalid int value"),
    # more compiles than cores can run only wait; unbounded, the build's forecast planned a slot
    # for each (3e9: 17 GB) before anything compiled
    ("build-jobs-3e9", ["--tile-build-jobs", "3000000000"], "--tile-build-jobs 3000000000: must be at most"),
    ("timeout-below-a-second", ["--tile-timeout", "0.001"], "--tile-timeout 0.001: must be at least 1 "),
    ("timeout-1e300", ["--tile-timeout", "1e300"], "must be at most 604,800 seconds (a week)"),
    ("build-limit-1e300", ["--tile-build-limit", "1e300"], "must be at most 604,800 seconds (a week)"),
    ("build-group-0", ["--tile-build-group", "0"], "--tile-build-group 0: must be at least 1"),
    ("timing-iters-negative", ["--tile-timing-iters=-1"], "--tile-timing-iters -1: must be 0 or more"),
    ("timing-iters-huge", ["--tile-timing-iters", "10000000000"], "must be at most 1,000,000"),
    ("seed-negative", ["--tile-seed=-1"], "--tile-seed -1: must be between 0 and 2**64-1"),
    ("seed-huge", ["--tile-seed", str(2**64)], "must be between 0 and 2**64-1"),
    ("seed-word", ["--tile-seed", "x"], "invalid int value"),
    ("shard-0-of-0", ["--tile-shard", "0/0"], "N must be at least 1"),
    ("shard-3-of-2", ["--tile-shard", "3/2"], "I must be between 1 and N=2"),
    ("shard-word", ["--tile-shard", "half"], "expected I/N with whole numbers"),
    ("shard-negative", ["--tile-shard=-1/2"], "expected I/N"),
    ("device-sm999", ["--tile-device", "virtual:sm999"], "no built-in profile 'sm999'"),
    ("device-unknown", ["--tile-device", "tpu"], "knows auto, hardware, virtual, compile"),
    ("arch-unknown", ["--tile-arch", "sm91"], "--tile-arch: unknown sm91; known: sm90, sm100"),
    ("arch-typo-among-good", ["--tile-arch", "sm90,sn120"], "unknown sn120"),
    ("arch-empty", ["--tile-arch", ","], "names no architecture; known: sm90"),
    ("cache-dir-a-file", ["--tile-cache-dir", "{tmp}/file"], "{tmp}/file: exists and is not a folder"),
    ("cache-dir-under-a-file", ["--tile-cache-dir", "{tmp}/file/c"], "cannot be created: Not a directory"),
    ("cache-dir-in-proc", ["--tile-cache-dir", "/proc/tileconform-cache"], "cannot be created"),
    ("sources-missing", ["--tile-flashinfer-sources", "{tmp}/nothing"], "{tmp}/nothing: no such folder"),
    ("sources-a-file", ["--tile-flashinfer-sources", "{tmp}/file"], "no such folder"),
    ("report-a-directory", ["--tile-report", "{tmp}"], "is a folder; name a file in it"),
    ("report-under-a-file", ["--tile-report", "{tmp}/file/r.json"], "{tmp}/file/r.json: Not a directory"),
    ("report-read-only", ["--tile-report", "{tmp}/ro.json"], "is read-only"),
    ("report-symlink-loop", ["--tile-report", "{tmp}/loop"], "Too many levels of symbolic links"),
    ("flashinfer-missing-wheel", ["--tile-flashinfer", "{tmp}/nothing.whl"], "--tile-flashinfer"),
    ("build-jobs-1e20", ["--tile-build-jobs", "1e20"], "--tile-build-jobs: invalid int value: '1e20'"),
    (
        "build-jobs-twenty-digits",
        ["--tile-build-jobs", "99999999999999999999"],
        "--tile-build-jobs 99999999999999999999: must be at most",
    ),
    ("build-jobs-5000-digits", ["--tile-build-jobs", "9" * 5000], "--tile-build-jobs: invalid int value"),
    ("timeout-subnormal", ["--tile-timeout", "1e-320"], "--tile-timeout 1e-320: must be at least 1 second"),
    ("timeout-5000-digits", ["--tile-timeout", "9" * 5000], "--tile-timeout inf: must be a finite number"),
    ("max-cases-5000-digits", ["--tile-max-cases", "9" * 5000], "--tile-max-cases: invalid int value"),
    ("cache-dir-empty", ["--tile-cache-dir", ""], "--tile-cache-dir '': must not be empty"),
    ("cache-dir-blank", ["--tile-cache-dir", "  "], "must not be empty"),
    ("report-empty", ["--tile-report", ""], "--tile-report '': must not be empty"),
    ("cache-trust-empty", ["--tile-cache-trust", ""], "--tile-cache-trust '': must not be empty"),
    ("verify-key-empty", ["--tile-cache-verify-key", ""], "--tile-cache-verify-key '': must not be empty"),
    ("sources-empty", ["--tile-flashinfer-sources", ""], "--tile-flashinfer-sources '': must not be empty"),
    ("flashinfer-empty", ["--tile-flashinfer", ""], "--tile-flashinfer '': must not be empty"),
    ("shard-5000-digits", ["--tile-shard", "1/" + "9" * 5000], "at most 100,000 shards"),
    ("shard-too-many", ["--tile-shard", "1/100001"], "--tile-shard '1/100001': at most 100,000 shards"),
    ("shard-other-digits", ["--tile-shard", "\u0661/\u0662"], "expected I/N with whole numbers"),
    (
        "flashinfer-and-sources",
        ["--tile-flashinfer", "0.6.0", "--tile-flashinfer-sources", "{tmp}"],
        "give one",
    ),
]


def _prepare(path: Path) -> None:
    (path / "file").write_text("a file")
    (path / "ro.json").write_text("{}")
    (path / "ro.json").chmod(0o444)
    if not (path / "loop").is_symlink():
        (path / "loop").symlink_to(path / "loop2")
        (path / "loop2").symlink_to(path / "loop")


@pytest.fixture
def run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    monkeypatch.delenv("PYTEST_XDIST_WORKER_COUNT", raising=False)
    monkeypatch.setenv("TILECONFORM_CACHE_DIR", str(pytester.path / "cache"))
    _prepare(pytester.path)
    (pytester.path / SMOKE.name).write_text(SMOKE.read_text())  # inside the rootdir
    return pytester


@pytest.mark.parametrize(("args", "fragment"), [o[1:] for o in OPTIONS], ids=[o[0] for o in OPTIONS])
def test_option(run: pytest.Pytester, args: list[str], fragment: str) -> None:
    tmp = str(run.path)
    argv = [a.replace("{tmp}", tmp) for a in args]
    result = run.runpytest("--tile-matrix", SMOKE.name, *argv, "-p", "no:xdist", "--collect-only")
    err = result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, (result.ret, err)
    assert fragment.replace("{tmp}", tmp) in err
    assert "Traceback" not in err and "collected" not in result.stdout.str()


INI: list[tuple[str, str, str]] = [
    ("ini-timeout-0", "tile_timeout = 0", "tile_timeout = 0: must be a finite number of seconds above 0"),
    ("ini-timeout-nan", "tile_timeout = nan", "tile_timeout = nan: must be a finite"),
    ("ini-timeout-word", "tile_timeout = soon", "tile_timeout = 'soon' is not a valid value"),
    ("ini-jobs-0", "tile_build_jobs = 0", "tile_build_jobs = 0: must be at least 1"),
    ("ini-jobs-word", "tile_build_jobs = all", "tile_build_jobs = 'all' is not a valid value"),
    ("ini-device", "tile_device = virtual:sm999", "no built-in profile 'sm999'"),
    ("ini-cache-a-file", "tile_cache_dir = file", "tile_cache_dir = file: exists and is not a folder"),
]


@pytest.mark.parametrize(("line", "fragment"), [i[1:] for i in INI], ids=[i[0] for i in INI])
def test_ini_key(run: pytest.Pytester, line: str, fragment: str) -> None:
    run.makeini(f"[pytest]\n{line}\n")
    result = run.runpytest("--tile-matrix", SMOKE.name, "-p", "no:xdist", "--collect-only")
    err = result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, (result.ret, err)
    assert fragment in err and "Traceback" not in err


def test_the_command_line_wins_over_a_bad_ini_key(run: pytest.Pytester) -> None:
    run.makeini("[pytest]\ntile_timeout = 0\n")
    result = run.runpytest(
        "--tile-matrix", SMOKE.name, "--tile-timeout", "5", "-p", "no:xdist", "--collect-only"
    )
    assert result.ret == pytest.ExitCode.OK


@pytest.mark.parametrize(
    "args",
    [
        [
            "--tile-timeout",
            "1",
            "--tile-build-jobs",
            "1",
            "--tile-seed",
            str(2**64 - 1),
            "--tile-arch",
            "SM90",
        ],
        ["--tile-report", "{tmp}/new/folder/r.json", "--tile-cache-dir", "{tmp}/new-cache"],
        ["--tile-report", "/dev/null"],
    ],
    ids=["good-values", "new-folders", "report-dev-null"],
)
def test_good_values_are_accepted(run: pytest.Pytester, args: list[str]) -> None:
    argv = [a.replace("{tmp}", str(run.path)) for a in args]
    result = run.runpytest("--tile-matrix", SMOKE.name, *argv, "-p", "no:xdist", "--collect-only")
    assert result.ret == pytest.ExitCode.OK, result.stderr.str()
    assert os.path.exists("/dev/null") and not Path("/dev/null").is_file()
