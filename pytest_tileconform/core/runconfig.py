"""The run options (:mod:`.runoptions`) in a pytest run: registered as ``--tile-<name>`` with
their ini keys, checked once at startup, and settled into the :class:`.runoptions.RunOptions`
the core hands every backend."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from ..compile.cache import default_cache_dir
from .inikeys import add_options, check_options, spelled
from .runoptions import RUN_OPTIONS, DeviceChoice, RunOptions


def add_run_options(group: pytest.OptionGroup, parser: pytest.Parser) -> None:
    add_options(group, parser, RUN_OPTIONS)


def run_options(config: pytest.Config) -> RunOptions:
    """Every run option, checked: a bad value is one usage error (exit 4) that names the option
    (or the ini key it came from), not a failure of every case. The cache's trust options become
    the environment every build in this process and its xdist workers reads."""
    check_options(config, RUN_OPTIONS)
    device = config.getoption("tile_device")
    try:
        choice = DeviceChoice.parse(device)
    except ValueError as exc:
        raise pytest.UsageError(f"{spelled(config, 'tile_device', repr(device))}: {exc}") from None
    _check_cache_dir(config)
    _cache_trust(config)
    remote, build_on = _remote(config)
    workerinput: dict[str, Any] | None = getattr(config, "workerinput", None)
    cache_option = config.getoption("tile_cache_dir")
    return RunOptions(
        device=choice,
        cache_dir=Path(cache_option) if cache_option else default_cache_dir(),
        jobs=config.getoption("tile_build_jobs"),
        group=config.getoption("tile_build_group"),
        timeout=config.getoption("tile_timeout"),
        seed=config.getoption("tile_seed"),
        timing_iters=config.getoption("tile_timing_iters"),
        keep_runs=config.getoption("tile_keep_runs"),
        worker_count=int(workerinput["workercount"]) if workerinput else 1,
        worker_index=int(workerinput["workerid"].removeprefix("gw")) if workerinput else 0,
        graph_replays=config.getoption("tile_graph_replays"),
        repeats=config.getoption("tile_repeats"),
        sequence=config.getoption("tile_sequence"),
        sanitize=config.getoption("tile_sanitize"),
        build_limit=config.getoption("tile_build_limit"),
        cache_remote=remote,
        build_on=build_on,
    )


def _check_cache_dir(config: pytest.Config) -> None:
    """The cache folder is made now, so that a path that cannot hold it is refused before
    anything is built."""
    cache = config.getoption("tile_cache_dir")
    if not cache:
        return
    path = Path(cache).expanduser()
    where = spelled(config, "tile_cache_dir", cache)
    if path.exists() and not path.is_dir():
        raise pytest.UsageError(f"{where}: exists and is not a folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise pytest.UsageError(f"{where}: cannot be created: {exc.strerror or exc}") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise pytest.UsageError(f"{where}: is not writable")


def _cache_trust(config: pytest.Config) -> None:
    """The cache's trust options become the environment every build in this process and its
    xdist workers reads (:mod:`..compile.trust`: the cache, the host builds, the probe), checked
    here so that a bad value, or a key file that cannot be used or that someone else can change
    (:func:`..compile.signing.check_key_file`), is one usage error."""
    from ..compile.trust import SIGNING_KEY_ENV, TRUST_ENV, VERIFY_KEY_ENV, TrustPolicy, TrustSettingError

    for option, variable in (
        ("tile_cache_trust", TRUST_ENV),
        ("tile_cache_signing_key", SIGNING_KEY_ENV),
        ("tile_cache_verify_key", VERIFY_KEY_ENV),
    ):
        value = config.getoption(option)
        if value is not None:
            if variable != TRUST_ENV and not Path(value).is_file():
                raise pytest.UsageError(f"{spelled(config, option, value)}: no such file")
            os.environ[variable] = str(Path(value).resolve()) if variable != TRUST_ENV else value
    from ..compile import signing

    try:
        policy = TrustPolicy.from_env()
        for key, own in ((policy.signing_key, True), (policy.verify_key, False)):
            if key is not None:  # a key someone else can change is refused now, not at a first entry
                signing.ready(key, own)
    except (TrustSettingError, signing.SigningError) as exc:
        raise pytest.UsageError(str(exc)) from None


def _remote(config: pytest.Config) -> tuple[str | None, str | None]:
    """The remote build cache (the option, else ``TILECONFORM_CACHE_REMOTE``) and the build farm,
    checked now: a URL whose protocol is not installed, a farm address that is not Ray's or a
    farm without a remote tier to deliver through is one usage error."""
    from ..compile.store import REMOTE_ENV, RemoteSettingError, check_url, timeout_from_env

    remote = config.getoption("tile_cache_remote") or os.environ.get(REMOTE_ENV) or None
    build_on = config.getoption("tile_build_on") or None
    try:
        timeout_from_env()
    except RemoteSettingError as exc:
        raise pytest.UsageError(str(exc)) from None
    try:
        if remote:
            check_url(remote)
    except RemoteSettingError as exc:
        given = config.getoption("tile_cache_remote")
        where = spelled(config, "tile_cache_remote", remote) if given else REMOTE_ENV
        raise pytest.UsageError(f"{where}: {exc}") from None
    if build_on:
        from ..compile.farm import check_address

        where = spelled(config, "tile_build_on", build_on)
        try:
            check_address(build_on)
        except ValueError as exc:
            raise pytest.UsageError(f"{where}: {exc}") from None
        if not remote:
            raise pytest.UsageError(
                f"{where}: the farm's units reach this run through a remote build cache: give "
                f"--tile-cache-remote URL (or {REMOTE_ENV}) too"
            )
    return remote, build_on
