"""Reasons as they are recorded: the same text on every machine and in every run.

A verdict's detail often quotes a compiler or runtime message, and those name files by their
full path: a temporary build directory that is gone once the build is over
(``<cache>/.build-k3j2x9q1/<key>/tu.cu(13)``), the build cache, an install under
site-packages. Recorded as they are, the same failure reads differently on each machine and
in each run, so ``--tile-update`` would rewrite a matrix's reason every time and two results
files would never agree. :func:`stable_reason` keeps the file's own name and replaces the
places with stable names.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from .compile.inputs import STAGED

#: What may come before a path in a message and is not part of it (a path's characters are the rest).
_PATH_CHAR = r"[^\s'\"()\[\]<>,;:=`]"

#: A directory made by ``tempfile`` (a prefix and eight random characters) for one build or run:
#: the build cache's ``.build-``/``.link-`` folders, nvcc's private folder, a run directory, an
#: unpacked release, or Python's own ``tmpXXXXXXXX``; and, under a build folder, the case's entry
#: (32 hex digits). Everything up to and including them is dropped: what remains is the name of
#: the file within, as the source knows it (``tu.cu(13)``).
_TEMPORARY = re.compile(
    rf"(?:{_PATH_CHAR}*/)?"
    r"(?:\.[A-Za-z][\w.-]*-|tileconform-[a-z]+-|tmp)[a-z0-9_]{8}/"
    r"(?:[0-9a-f]{32}/)?"
)

#: A signed build's private copy of one of its inputs (:data:`.compile.inputs.STAGED`): its
#: files are named as the input, ``<NAME>/...``, as a build from the input in place is named
#: through the backend's places (``<flashinfer>/...``): compiled-in file names (a TensorRT-LLM
#: assertion's ``__FILE__``) then read the same whether the harness was signed or not.
_STAGED_INPUT = re.compile(
    rf"(?:{_PATH_CHAR}*/)?\.[A-Za-z][\w.-]*-[a-z0-9_]{{8}}/{re.escape(STAGED)}/([A-Za-z_][A-Za-z0-9_]*)/"
)

#: An installed package's files, wherever the environment is.
_SITE_PACKAGES = re.compile(rf"{_PATH_CHAR}*/(?:site|dist)-packages/")

#: One frame of a native backtrace, as TensorRT-LLM's ``throwRuntimeError`` appends to its
#: messages (``3       0x7f1c... symbol + 157``): addresses that differ in every build, so the
#: frames are dropped and the message itself kept.
_BACKTRACE_FRAME = re.compile(r"^\s*\d+\s+0x[0-9a-fA-F]+\s.*$\n?", re.MULTILINE)

#: How many characters of a reason a matrix keeps (:func:`shorten`).
MATRIX_REASON_LIMIT = 2000


def stable_reason(text: str, places: Mapping[str, Path | str] | None = None) -> str:
    """``text`` with temporary build and run directories removed and known places named.

    ``places`` maps a stable name to a directory, e.g. ``{"<cache>": cache_dir}``: a path under
    it is written ``<cache>/...`` (the directory as given or resolved). Installed packages become
    ``<site-packages>/...`` and the home directory ``~``. Native backtrace frames and trailing
    blanks go. Applying it again
    changes nothing.
    """
    text = _BACKTRACE_FRAME.sub("", text)
    text = _STAGED_INPUT.sub(r"<\1>/", text)
    text = _TEMPORARY.sub("", text)
    named = []
    for name, path in (places or {}).items():
        for spelling in {str(path).rstrip("/"), str(Path(path).resolve())}:
            if spelling not in ("", "/"):
                named.append((name, spelling))
    for name, spelling in sorted(named, key=lambda pair: -len(pair[1])):  # the deepest place first
        text = re.sub(rf"(?<!{_PATH_CHAR}){re.escape(spelling)}(?=/|(?!{_PATH_CHAR}))", name, text)
    text = _SITE_PACKAGES.sub("<site-packages>/", text)
    home = str(Path.home())
    if home not in ("", "/"):
        text = re.sub(rf"(?<!{_PATH_CHAR}){re.escape(home)}(?=/)", "~", text)
    return "\n".join(line.rstrip() for line in text.strip().splitlines())


def shorten(text: str, limit: int = MATRIX_REASON_LIMIT) -> str:
    """``text`` whole if it has at most ``limit`` characters, else cut at the last line or word
    boundary before it, with a marker that says how much is missing.

    A matrix is read and reviewed as a file, one expectation per line: a reason that quotes a whole
    log must not make that line kilobytes long. The verdict keeps the whole text (the results
    file, the failure's report).
    """
    if len(text) <= limit:
        return text
    head = text[: limit + 1]  # a blank just past the limit is a boundary too
    cut = head.rfind("\n")
    if cut < limit // 2:
        cut = max(head.rfind(" "), head.rfind("\t"))
    if cut < limit // 2:
        cut = limit
    kept = text[:cut].rstrip()
    return f"{kept} [... {len(text) - len(kept)} characters cut]"
