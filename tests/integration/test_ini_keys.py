"""Options a team sets once are ini keys too (tile_device, tile_cache_dir, tile_timeout,
tile_build_jobs); the command line wins over the ini key, the ini key over the default. Checked
on what the FlashInfer backend is built with, in a pytest run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers.fake_backend import BASIC, TileRun

#: A plugin that records the settings the FlashInfer backend was built with.
SETTINGS_PLUGIN = """
import json

import pytest


@pytest.hookimpl(wrapper=True)
def pytest_tileconform_register_backends(config):
    found = yield
    for backends in found:
        for backend in backends:
            if backend.name == "flashinfer-cutlass-moe":
                s = backend.settings
                record = {"device": str(s.device), "cache_dir": str(s.cache_dir), "timeout": s.timeout,
                          "jobs": s.jobs}
                with open(config.rootpath / "settings.json", "w") as handle:
                    json.dump(record, handle)
    return found
"""


def settings(tc: TileRun, *args: str, ini: str = "") -> dict[str, Any]:
    tc.pytester.makepyfile(tilesettings=SETTINGS_PLUGIN)
    tc.pytester.syspathinsert()
    if ini:
        tc.pytester.makeini("[pytest]\n" + ini)
    tc.matrix(BASIC)
    result = tc.run("-p", "tilesettings", "--collect-only", *args)
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    recorded: dict[str, Any] = json.loads((tc.path / "settings.json").read_text())
    return recorded


def test_defaults_without_ini_keys(tc: TileRun, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TILECONFORM_CACHE_DIR", "/somewhere/cache")
    assert settings(tc) == {"device": "auto", "cache_dir": "/somewhere/cache", "timeout": 120.0, "jobs": None}


def test_ini_keys_set_the_options(tc: TileRun) -> None:
    ini = (
        "tile_device = virtual:sm90\ntile_cache_dir = shared/cache\ntile_timeout = 30\ntile_build_jobs = 3\n"
    )
    assert settings(tc, ini=ini) == {
        "device": "virtual:sm90",
        "cache_dir": str(tc.path / "shared" / "cache"),  # relative to the ini file
        "timeout": 30.0,
        "jobs": 3,
    }


def test_the_command_line_wins_over_the_ini_keys(tc: TileRun) -> None:
    ini = (
        "tile_device = virtual:sm90\ntile_cache_dir = shared/cache\ntile_timeout = 30\ntile_build_jobs = 3\n"
    )
    assert settings(
        tc,
        "--tile-device",
        "compile",
        "--tile-cache-dir",
        "/abs/cache",
        "--tile-timeout",
        "5",
        "--tile-build-jobs",
        "1",
        ini=ini,
    ) == {"device": "compile", "cache_dir": "/abs/cache", "timeout": 5.0, "jobs": 1}


def test_the_command_line_wins_even_with_the_default_value(tc: TileRun) -> None:
    assert settings(tc, "--tile-device", "auto", ini="tile_device = virtual\n")["device"] == "auto"


def test_ini_keys_in_pyproject(tc: TileRun) -> None:
    tc.pytester.makepyprojecttoml(
        '[tool.pytest.ini_options]\ntile_device = "virtual"\ntile_timeout = "7.5"\n'
    )
    recorded = settings(tc)
    assert (recorded["device"], recorded["timeout"]) == ("virtual", 7.5)


def test_a_bad_ini_value_is_a_usage_error(tc: TileRun) -> None:
    tc.pytester.makeini("[pytest]\ntile_timeout = soon\n")
    tc.matrix(BASIC)
    result = tc.run("--collect-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*tox.ini: tile_timeout = 'soon' is not a valid value for --tile-timeout"])


def test_a_bad_device_from_the_ini_is_refused_like_the_option(tc: TileRun) -> None:
    tc.pytester.makeini("[pytest]\ntile_device = gpu\n")
    tc.matrix(BASIC)
    result = tc.run("--collect-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--tile-device 'gpu': *"])


def test_the_ini_cache_dir_is_the_cache_that_reasons_name(tc: TileRun) -> None:
    """A compile error quoted from the cache set in the ini file is recorded as ``<cache>/...``."""
    tc.pytester.makeini("[pytest]\ntile_cache_dir = .tilecache\n")
    cache = Path(tc.path / ".tilecache")
    tc.matrix(BASIC)
    tc.verdicts(
        {"sm90-bf16-128x64x64-c1x1x1-none": {"stage": "compile", "detail": f"see {cache}/ab/x/build.log"}}
    )
    result = tc.run("-q")
    result.stdout.fnmatch_lines(["  verdict: compile see <cache>/ab/x/build.log [[]fake[]]"])
