"""The plugins that add ``tileconform`` commands: a backend's pytest plugin implements
``pytest_tileconform_add_commands`` (:mod:`..newhooks`) and its commands join the core's.

The command line is not a pytest run, so it finds those plugins itself, as pytest would: the
``pytest11`` entry points, but only of distributions that are pytest-tileconform or require it
(another pytest plugin has no commands to add, and importing it would slow every ``--help``).
"""

from __future__ import annotations

import argparse
import inspect
from collections.abc import Iterable, Iterator
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any, cast

import pluggy
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from .. import newhooks
from ..matrix.kinds import CaseKind, kinds_by_backend

DISTRIBUTION = "pytest-tileconform"
#: the prefix of the hooks a command plugin implements, marked or not (as pytest takes them)
HOOK_PREFIX = "pytest_tileconform_"


class CommandPlugins(pluggy.PluginManager):
    """Plugins as pytest registers them: a ``pytest_tileconform_*`` function is a hook
    implementation without ``@pytest.hookimpl``."""

    def __init__(self) -> None:
        super().__init__("pytest")
        self.add_hookspecs(newhooks)

    def parse_hookimpl_opts(self, plugin: Any, name: str) -> pluggy.HookimplOpts | None:
        if not name.startswith(HOOK_PREFIX):
            return None
        opts = super().parse_hookimpl_opts(plugin, name)
        if opts is None and inspect.isroutine(getattr(plugin, name, None)):
            return cast(pluggy.HookimplOpts, {})
        return opts

    def kinds(self) -> dict[str, CaseKind]:
        """What the plugins declare of their backends' cases, by backend (:mod:`..matrix.kinds`)."""
        return kinds_by_backend(self.hook.pytest_tileconform_case_kinds())


if TYPE_CHECKING:
    _Subparsers = argparse._SubParsersAction[argparse.ArgumentParser]
else:  # not subscriptable at run time
    _Subparsers = argparse._SubParsersAction


class Commands(_Subparsers):
    """The subparsers plugins add their commands to: a command another plugin added already is
    handed back rather than refused, so that a second backend can answer it too (its own options
    in a group, its handler routing what they claim and passing the rest to the handler it found,
    ``parser.get_default("handler")``). Its plugin orders itself after the first
    (``@pytest.hookimpl(trylast=True)``)."""

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        found = self.choices.get(name)
        if isinstance(found, argparse.ArgumentParser):
            return found
        return super().add_parser(name, **kwargs)


def _tileconform_distribution(requires: Iterable[str] | None, name: str) -> bool:
    if canonicalize_name(name) == DISTRIBUTION:
        return True
    for text in requires or ():
        try:
            if canonicalize_name(Requirement(text).name) == DISTRIBUTION:
                return True
        except InvalidRequirement:
            continue
    return False


def _installed() -> Iterator[tuple[str, object]]:
    for entry in entry_points(group="pytest11"):
        dist = entry.dist
        if dist is not None and _tileconform_distribution(dist.requires, dist.metadata["Name"]):
            yield entry.name, entry.load()


def command_plugins(extra: Iterable[object] = ()) -> CommandPlugins:
    """Every installed plugin that may add commands, and ``extra`` (plugin objects or modules
    given by the caller, as ``pytest.main(plugins=...)`` takes them)."""
    manager = CommandPlugins()
    for name, plugin in _installed():
        if manager.get_plugin(name) is None:
            manager.register(plugin, name)
    for plugin in extra:
        manager.register(plugin)
    return manager
