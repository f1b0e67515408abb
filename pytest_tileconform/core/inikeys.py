"""Options a team sets once, as ini keys (pytest.ini, tox.ini, setup.cfg or pyproject.toml's
``[tool.pytest.ini_options]``): device, cache directory, timeout, build jobs.

Such an option has ``None`` as its command-line default, so "not given" can be told from "given
the default value"; :func:`resolve` then fills it from its ini key, else from its own default,
before any backend reads it. The command line wins over the ini key, the ini key over the default.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest


@dataclass(frozen=True)
class IniKey:
    name: str  # the ini key, and the option's dest
    convert: Callable[[str], Any]
    default: Any
    path: bool  # a relative path is relative to the ini file's folder


#: every ini-backed option, by name; the same in every pytest run of this process
_KEYS: dict[str, IniKey] = {}
#: per run: the ini-backed options whose value came from their ini key, with its raw text
_FROM_INI = pytest.StashKey[dict[str, str]]()


def add_ini_key(
    parser: pytest.Parser,
    name: str,
    convert: Callable[[str], Any],
    default: Any,
    help: str,
    *,
    path: bool = False,
) -> None:
    """Register ini key ``name`` for the option whose dest is ``name`` (its default must be None)."""
    flag = "--" + name.replace("_", "-")
    parser.addini(name, help=f"{help} ({flag} wins over it)", default="")
    _KEYS[name] = IniKey(name, convert, default, path)


def resolve(config: pytest.Config) -> None:
    """Fill every ini-backed option the command line left out from its ini key or its default."""
    from_ini = config.stash.setdefault(_FROM_INI, {})
    for key in _KEYS.values():
        if getattr(config.option, key.name, True) is not None:
            continue  # given on the command line (or not an option of this run's plugins)
        raw = str(config.getini(key.name)).strip()
        value = key.default
        if raw:
            try:
                value = key.convert(raw)
            except ValueError:
                where = config.inipath or "the ini file"
                raise pytest.UsageError(
                    f"{where}: {key.name} = {raw!r} is not a valid value for --{key.name.replace('_', '-')}"
                ) from None
            from_ini[key.name] = raw
            if key.path:
                base = config.inipath.parent if config.inipath else config.rootpath
                value = str(base / Path(value).expanduser())
        setattr(config.option, key.name, value)


def spelled(config: pytest.Config, name: str, value: Any) -> str:
    """How the user gave option ``name``, for a message about its value: ``--tile-timeout 0``,
    or ``pytest.ini: tile_timeout = 0`` when the value came from the ini key."""
    raw = config.stash.get(_FROM_INI, {}).get(name)
    if raw is not None:
        return f"{config.inipath or 'the ini file'}: {name} = {raw}"
    return f"--{name.replace('_', '-')} {value}"
