"""The YAML a matrix may use: plain data of YAML 1.2's core schema, a tree.

ruamel's round-trip loader accepts more, and each extra is a way for a file to mean something
other than what it shows, or to crash the tools that read it: a ``!!python/...`` tag names code
(the round-trip loader does not run it, but it turns the value into an object no validator
expects), a local tag (``!mine``) or any other is dropped or kept depending on the node, YAML
1.1's merge key ``<<`` copies keys the updater cannot write back, an alias of a node that
contains it makes a cycle, ``1_000`` is a number to ruamel and text to YAML 1.2, and an integer
of thousands of digits stops Python's own conversion. Each is refused here, as the file is
composed, at its position, with what to write instead.
"""

from __future__ import annotations

from typing import Any

from ruamel.yaml.composer import ComposerError
from ruamel.yaml.events import AliasEvent, CollectionStartEvent, ScalarEvent
from ruamel.yaml.nodes import ScalarNode

from .bounds import BoundedComposer

_CORE = "tag:yaml.org,2002:"
#: The one explicit tag a matrix may carry: ``!``, a plain string. Even the core schema's
#: (``!!str``) are refused: ruamel keeps a tagged value as an object of its own, which the
#: validator would refuse with a message about its type, not the tag.
ALLOWED_TAGS = frozenset({"!"})
#: The most characters of an integer: the largest bound of a matrix value (16 M) has eight.
MAX_DIGITS = 20


class NotMatrixYAML(ComposerError):
    """Valid YAML that a matrix does not take; the message says what to write instead."""

    def __init__(self, message: str, mark: Any) -> None:
        super().__init__(None, None, message, mark)


def _shown(tag: str) -> str:
    return "!!" + tag.removeprefix(_CORE) if tag.startswith(_CORE) else tag


class MatrixComposer(BoundedComposer):
    """:class:`.bounds.BoundedComposer` that also refuses what :mod:`this module <.yamlsubset>`
    names, before ruamel builds anything from it."""

    def __init__(self, loader: Any = None) -> None:
        super().__init__(loader)
        self._started = 0
        self._latest: dict[str, int] = {}  # anchor -> the node that defines it now
        self._open: set[int] = set()  # the anchored collections being composed

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.parser.peek_event()
        if isinstance(event, AliasEvent):
            if self._latest.get(event.anchor) in self._open:
                raise NotMatrixYAML(
                    f"alias *{event.anchor} is inside the node &{event.anchor} it names (a recursive "
                    "alias): a matrix is a tree; write the values out",
                    event.start_mark,
                )
            return super().compose_node(parent, index)
        self._check(event)
        if event.anchor is None or not isinstance(event, CollectionStartEvent):
            if event.anchor is not None:
                self._started += 1
                self._latest[event.anchor] = self._started
            return super().compose_node(parent, index)
        self._started += 1
        mine = self._started
        self._latest[event.anchor] = mine
        self._open.add(mine)
        try:
            return super().compose_node(parent, index)
        finally:
            self._open.discard(mine)

    def _check(self, event: Any) -> None:
        tag = None if event.ctag is None else str(event.ctag)
        if tag is not None and tag not in ALLOWED_TAGS:
            if tag.startswith(_CORE + "python/"):
                why = "a Python object tag: a matrix is data and never names Python objects"
            else:
                why = "a matrix takes no YAML tags (quote a value that must stay text)"
            raise NotMatrixYAML(f"tag {_shown(tag)}: {why}; remove it", event.start_mark)
        if not isinstance(event, ScalarEvent) or event.style is not None or tag is not None:
            return  # a quoted or tagged scalar is what it says
        value = event.value
        if value == "<<":
            raise NotMatrixYAML(
                "merge key '<<' (YAML 1.1): a matrix does not merge mappings, which --tile-update "
                "could not write back; write the keys out, or put shared axes in 'defaults'",
                event.start_mark,
            )
        resolved = str(self.resolver.resolve(ScalarNode, value, (True, False)))
        if resolved not in (_CORE + "int", _CORE + "float"):
            return
        if "_" in value:
            raise NotMatrixYAML(
                f"number {value}: '_' between digits is YAML 1.1 (YAML 1.2 reads it as text); "
                f"write {value.replace('_', '')}",
                event.start_mark,
            )
        digits = len(value.lstrip("+-"))
        if resolved == _CORE + "int" and digits > MAX_DIGITS:
            raise NotMatrixYAML(
                f"an integer of {digits:,} digits: no matrix value has more than {MAX_DIGITS}",
                event.start_mark,
            )
