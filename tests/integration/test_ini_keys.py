"""Options a team sets once are ini keys too (tile_device, tile_cache_dir, tile_timeout,
tile_build_jobs); the command line wins over the ini key, the ini key over the default. Checked
on what the FlashInfer backend is built with, in a pytest run."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from helpers.fake_backend import BASIC, BASIC_IDS, TileRun

#: A plugin that records the settings the FlashInfer backend was built with.
SETTINGS_PLUGIN = """
import json
import re

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
    result.stderr.fnmatch_lines(["*tox.ini: tile_device = gpu: tileconform knows auto, *"])


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


def test_every_option_has_its_ini_key(pytester: pytest.Pytester) -> None:
    """``pytest --help`` lists an ini key ``tile_X`` for every ``--tile-X`` of the plugin and its
    FlashInfer backend (the keys come from the options' one declaration, not a second list)."""
    result = pytester.runpytest("--help")
    text = result.stdout.str()
    flags = set(re.findall(r"^\s+--tile-([a-z-]+)", text, re.MULTILINE))
    keys = set(re.findall(r"^\s+tile_([a-z_]+) \(", text, re.MULTILINE))
    assert len(flags) >= 26, sorted(flags)
    assert {flag.replace("-", "_") for flag in flags} == keys


#: A value of each option for its ini key, and what pytest's option then holds.
INI_VALUES: dict[str, tuple[str, Any]] = {
    "tile_arch": ("sm90", "sm90"),
    "tile_device": ("virtual", "virtual"),
    "tile_update": ("true", True),
    "tile_update_force": ("yes", True),
    "tile_require_run": ("1", True),
    "tile_report": ("out/r.json", "{root}/out/r.json"),
    "tile_max_cases": ("50", 50),
    "tile_shard": ("1/1", "1/1"),
    "tile_cache_dir": ("c", "{root}/c"),
    "tile_cache_trust": ("any", "any"),
    "tile_cache_remote": ("file:///nowhere/remote", "file:///nowhere/remote"),
    "tile_build_jobs": ("2", 2),
    "tile_build_group": ("4", 4),
    "tile_build_limit": ("60", 60.0),
    "tile_timeout": ("9", 9.0),
    "tile_timing_iters": ("3", 3),
    "tile_graph_replays": ("2", 2),
    "tile_repeats": ("1", 1),
    "tile_sequence": ("5", 5),
    "tile_sanitize": ("memcheck", "memcheck"),
    "tile_seed": ("7", 7),
    "tile_keep_runs": ("on", True),
    "tile_flashinfer_sources": ("fi", "{root}/fi"),
}

OPTIONS_PLUGIN = """
import json
import re

import pytest


@pytest.hookimpl(trylast=True)
def pytest_configure(config):
    names = json.loads((config.rootpath / "names.json").read_text())
    found = {name: config.getoption(name) for name in names}
    (config.rootpath / "options.json").write_text(json.dumps(found))
"""


def test_each_ini_key_sets_its_option(tc: TileRun) -> None:
    """Each key set in the ini file reaches the option as the command line would set it; paths
    are relative to the ini file. (The signing keys, the release and the matrix list are paths
    or names with checks of their own, tested where they are.)"""
    tc.pytester.makepyfile(tileoptions=OPTIONS_PLUGIN)
    tc.pytester.syspathinsert()
    (tc.path / "names.json").write_text(json.dumps(sorted(INI_VALUES)))
    (tc.path / "fi").mkdir()
    tc.pytester.makeini("[pytest]\n" + "".join(f"{key} = {raw}\n" for key, (raw, _) in INI_VALUES.items()))
    tc.matrix(BASIC)
    result = tc.run("-p", "tileoptions", "--collect-only", "-p", "no:xdist")
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    found = json.loads((tc.path / "options.json").read_text())
    root = str(tc.path)
    expected = {
        key: value.format(root=root) if isinstance(value, str) else value
        for key, (_, value) in INI_VALUES.items()
    }
    assert found == expected


def test_the_matrix_list_from_the_ini_key(tc: TileRun) -> None:
    tc.pytester.makeini("[pytest]\ntile_matrix =\n    sub/m.yaml\n")
    tc.matrix(BASIC, "sub/m.yaml")
    assert tc.collect(matrix=None) == [f"sub/m.yaml::{case}" for case in BASIC_IDS]


@pytest.mark.parametrize(
    ("ini", "message"),
    [
        ("tile_max_cases = 0", "tox.ini: tile_max_cases = 0: must be at least 1"),
        ("tile_build_group = 0", "tox.ini: tile_build_group = 0: must be at least 1"),
        ("tile_update = perhaps", "tox.ini: tile_update = 'perhaps' is not a valid value for --tile-update"),
        ("tile_seed = -1", "tox.ini: tile_seed = -1: must be between 0 and 2**64-1"),
        ("tile_flashinfer_sources = nowhere", "tox.ini: tile_flashinfer_sources = nowhere: no such folder"),
    ],
)
def test_a_refused_ini_value_names_the_ini_key(tc: TileRun, ini: str, message: str) -> None:
    tc.pytester.makeini(f"[pytest]\n{ini}\n")
    tc.matrix(BASIC)
    result = tc.run("--collect-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert message in result.stderr.str()
