"""Every option of the plugin and its backends is an ini key too (pytest.ini, tox.ini, setup.cfg
or pyproject.toml's ``[tool.pytest.ini_options]``): an :class:`.runoptions.Option` registered with
:func:`add_options` is ``--tile-<name>`` and ``tile_<name>``, so a team sets once what a run
would otherwise repeat, and no option is left without its key.

Such an option has ``None`` as its command-line default, so "not given" can be told from "given
the default value"; :func:`resolve` then fills it from its ini key, else from its own default,
before any backend reads it. The command line wins over the ini key, the ini key over the default.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest

from .runoptions import Option

#: every option with its ini key, by dest; the same in every pytest run of this process
_KEYS: dict[str, Option] = {}
#: per run: the options whose value came from their ini key, with its raw text
_FROM_INI = pytest.StashKey[dict[str, str]]()


def add_options(group: pytest.OptionGroup, parser: pytest.Parser, options: Iterable[Option]) -> None:
    """Register each option as ``--tile-<name>`` and as ini key ``tile_<name>``."""
    for option in options:
        help = f"{option.help} (ini key {option.dest})"
        if option.many:
            group.addoption(
                option.flag, action="append", dest=option.dest, default=[], metavar=option.metavar, help=help
            )
            parser.addini(option.dest, type="paths", default=[], help=f"like {option.flag}, one a line")
        elif option.type is None:
            group.addoption(option.flag, action="store_true", dest=option.dest, default=None, help=help)
            parser.addini(option.dest, default="", help=f"true: like {option.flag} ({option.flag} wins)")
        else:
            group.addoption(
                option.flag,
                dest=option.dest,
                type=option.type,
                default=None,
                metavar=option.metavar,
                help=help,
            )
            parser.addini(option.dest, default="", help=f"like {option.flag} ({option.flag} wins over it)")
        _KEYS[option.dest] = option


def switch(text: str) -> bool:
    """An ini key's on/off value, as pytest spells its own (``true``/``false``, ``1``/``0``)."""
    value = {"true": True, "1": True, "yes": True, "on": True}.get(text.lower())
    if value is None and text.lower() not in ("false", "0", "no", "off"):
        raise ValueError(text)
    return bool(value)


def resolve(config: pytest.Config) -> None:
    """Fill every option the command line left out from its ini key or its default."""
    from_ini = config.stash.setdefault(_FROM_INI, {})
    for option in _KEYS.values():
        given = getattr(config.option, option.dest, True)
        if option.many:
            if given == []:  # the ini key's paths are already relative to the ini file
                setattr(config.option, option.dest, [str(p) for p in config.getini(option.dest)])
            continue
        if given is not None:
            continue  # given on the command line (or not an option of this run's plugins)
        raw = str(config.getini(option.dest)).strip()
        value = option.default
        if raw:
            convert: Callable[[str], Any] = option.type or switch
            try:
                value = convert(raw)
            except (ValueError, OverflowError):
                where = config.inipath or "the ini file"
                raise pytest.UsageError(
                    f"{where}: {option.dest} = {raw!r} is not a valid value for {option.flag}"
                ) from None
            from_ini[option.dest] = raw
            if option.path:
                base = config.inipath.parent if config.inipath else config.rootpath
                value = str(base / Path(value).expanduser())
        setattr(config.option, option.dest, value)


def check_options(config: pytest.Config, options: Iterable[Option]) -> None:
    """Each option's value as its own refusal judges it: a bad one is one usage error (exit 4)
    that names the option, or the ini key it came from."""
    for option in options:
        value = config.getoption(option.dest)
        why = None if value is None or option.many else option.refuse(value)
        if why is not None:
            raise pytest.UsageError(f"{spelled(config, option.dest, value)}: {why}")


def spelled(config: pytest.Config, name: str, value: Any) -> str:
    """How the user gave option ``name``, for a message about its value: ``--tile-timeout 0``,
    or ``pytest.ini: tile_timeout = 0`` when the value came from the ini key."""
    raw = config.stash.get(_FROM_INI, {}).get(name)
    if raw is not None:
        return f"{config.inipath or 'the ini file'}: {name} = {raw}"
    return f"--{name.replace('_', '-')} {value if value != '' else repr(value)}"
