"""A stand-in for nvcc that the build cache runs like the real one, in a second: it copies the
unit's source to the output, counts its invocations in a file (one line per compile, the unit's
first line) and does what the source says: ``FAIL`` a compile error located in the unit, ``KILL``
dies of SIGKILL as the out-of-memory killer would end it, ``SLOW`` takes a minute, ``PAUSE``
writes its process id beside the count and takes a few seconds (a test can kill what runs it)."""

from __future__ import annotations

import sys
from pathlib import Path

from pytest_tileconform.compile.cache import BuildSpec

FAKE_COMPILER = """
import os, sys, pathlib, time
src, out, counter = map(pathlib.Path, sys.argv[1:4])
with counter.open("a") as f:
    f.write(src.read_text().splitlines()[0] + "\\n")
text = src.read_text()
time.sleep(0.2)
if "PAUSE" in text:
    counter.with_suffix(".pid").write_text(str(os.getpid()))
    time.sleep(4)
if "SLOW" in text:
    time.sleep(60)
if "FAIL" in text:
    print(f"{src}(12): error: static assertion failed with \\"tile too big\\"")
    sys.exit(1)
if "KILL" in text:  # as the out-of-memory killer would end it
    import signal
    os.kill(os.getpid(), signal.SIGKILL)
out.write_text(text)
"""


def make_compiler(folder: Path) -> tuple[Path, Path]:
    """The stand-in's script in ``folder``, and the file its invocations are counted in."""
    script = folder / "fake_nvcc.py"
    script.write_text(FAKE_COMPILER)
    return script, folder / "invocations.txt"


def spec(source: str, compiler: tuple[Path, Path], salt: str = "nvcc 13.0") -> BuildSpec:
    """The build of a unit of text ``source`` by the stand-in (its label: the first line)."""
    script, counter = compiler
    return BuildSpec(
        source=source,
        command=(sys.executable, str(script), "{src}", "{out}", str(counter)),
        salt=salt,
        ram_bytes=1 << 30,
        label=source.splitlines()[0],
    )


def invocations(compiler: tuple[Path, Path]) -> list[str]:
    """The units the stand-in compiled, in order (their first lines)."""
    counter = compiler[1]
    return counter.read_text().splitlines() if counter.exists() else []
