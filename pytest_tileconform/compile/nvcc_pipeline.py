"""Run an ``nvcc -c`` compile (or an ``nvcc -cuda``, whose last pass preprocesses the host
code instead of compiling it) as nvcc would, with its independent passes side by side.

nvcc runs the passes of a compile strictly one after the other. For a ``.cu`` file they are
(``nvcc --dryrun`` lists them): host ``gcc -E`` -> ``cudafe++`` (host side; it also writes the
*module id*) and device ``gcc -E`` -> ``cicc`` (reads the module id; writes the PTX and the host
stub) -> ``ptxas`` -> ``fatbinary``, then the host ``gcc -c`` of cudafe++'s output, which
includes the stub, which includes the fat binary. The only thing the device branch takes from
the host branch is the module id, so once it is written beforehand both branches run at once;
so do the chains of the other source files of the command. Only the final host compile of a
``.cu`` waits for both of its branches.

How: nvcc itself gives the plan (``--dryrun``, its intermediate files in a private
``--keep-dir``); the module id is written first (:func:`module_id`), ``--gen_module_id_file``
is dropped from cudafe++ (which then reads the file), and each step runs, through ``sh -c``
with nvcc's environment assignments as nvcc runs it, as soon as the earlier steps that share a
file with it are done. What the steps print is passed on in nvcc's order, and the first step
that fails in nvcc's order decides the exit status and is the last whose output is shown, so
a failing compile prints what nvcc prints (intermediate files have other temporary names) and
leaves no object that nvcc would not have written. A step killed by a signal (a compiler killed
for memory) ends the pipeline by the same signal (where nvcc says "died due to signal N"), so a
caller that tells a kill from a compiler's error (a backend's probe of what a release can build)
sees the kill.

A plan of a shape this module does not know (another nvcc, other options) is not guessed at:
the command is run by nvcc unchanged, saying so in one line on stderr. So is every command
when ``TILECONFORM_NVCC_PIPELINE=0``.

Usage, in place of ``nvcc ARGS``: ``python -m pytest_tileconform.compile.nvcc_pipeline nvcc ARGS``.
Only the standard library is used, so the file also runs as a script.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import os
import queue
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

PREFIX = "#$ "
NOTICE = "nvcc-pipeline"
DISABLE = "TILECONFORM_NVCC_PIPELINE"
CUDA_TOOLS = frozenset({"cudafe++", "cicc", "ptxas", "fatbinary"})
GEN_MODULE_ID = "--gen_module_id_file"
MODULE_ID_FILE = "--module_id_file_name"
#: options of nvcc's own tools that name what they write: all of it must be an intermediate
CUDA_OUTPUT_OPTIONS = ("-o", "--gen_c_file_name", "--gen_device_file_name", "--create", "--embedded-fatbin")
#: options whose output or side effects a parallel run would not reproduce, or that hide
#: further options from this module; a command with one of them runs unchanged
UNSUPPORTED_OPTIONS = (
    "--dryrun",
    "-dryrun",
    "--verbose",
    "-v",
    "--keep",
    "-keep",
    "--keep-dir",
    "-keep-dir",
    "--save-temps",
    "-save-temps",
    "--time",
    "-time",
    "--options-file",
    "-optf",
    "--run",
    "-run",
)
_ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)\Z", re.DOTALL)
_VARIABLE = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")
_SHELL_SPECIAL = ("'", "`", "$(", "\\")


class Unrecognized(Exception):
    """The dryrun is not of a shape this module runs in parallel; the reason is the message."""


@dataclass(frozen=True)
class Step:
    """One command of the dryrun, in nvcc's order."""

    index: int
    command: str  # the shell line run by ``sh -c`` (nvcc's, less --gen_module_id_file)
    tool: str  # cudafe++, cicc, ptxas, fatbinary or host (the host compiler)
    files: frozenset[str]  # files it shares with other steps: intermediates, its object
    output: str | None  # the object it writes outside the private directory (a chain's end)
    after: frozenset[int]  # indexes of the steps it must wait for
    spare: bool = False  # of a source without device code: started only while a core is idle


@dataclass(frozen=True)
class Plan:
    steps: tuple[Step, ...]
    env: dict[str, str]  # the environment the steps run in (nvcc's assignments applied)
    module_ids: dict[str, str]  # module id file -> the id written into it before the steps run
    stdout: bytes  # what nvcc itself printed while planning (warnings about options)
    stderr: bytes


@dataclass
class _Done:
    returncode: int
    stdout: bytes
    stderr: bytes


def module_id(source_path: str, content: bytes, argv: Sequence[str]) -> str:
    """The module id written for a ``.cu``: nvcc's shape, ``_<crc32 of the source path>_<length>_
    <file name>_<suffix>``. nvcc's suffix is the first external definition cudafe++ finds, which
    only the front end knows; here it is a hash of the source and the nvcc arguments, so the id
    is as unique as nvcc's and depends only on the inputs. The id names internal-linkage device
    symbols (``_INTERNAL_<id>...``), so cubins differ from nvcc's in those names only."""
    name = re.sub(r"[^A-Za-z0-9_]", "_", Path(source_path).name)
    digest = hashlib.sha256(content)
    for arg in argv:
        digest.update(b"\0" + arg.encode())
    return f"_{zlib.crc32(source_path.encode()):08x}_{len(name)}_{name}_{digest.hexdigest()[:16]}"


def _split(body: str, env: dict[str, str]) -> list[str]:
    """A dryrun command as the arguments the shell would pass (variables expanded); lines with
    shell syntax beyond quotes and variables are not planned."""
    if any(special in body for special in _SHELL_SPECIAL):
        raise Unrecognized(f"shell syntax in {body[:80]!r}")
    lexer = shlex.shlex(body, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    words = list(lexer)
    if any(word and all(c in "();<>|&" for c in word) for word in words):
        raise Unrecognized(f"shell operator in {body[:80]!r}")

    def expand(word: str) -> str:
        return _VARIABLE.sub(lambda m: env.get(m.group(1) or m.group(2), ""), word)

    return [expand(word) for word in words]


def _value(argv: Sequence[str], option: str) -> str | None:
    """The value of ``option`` (``option V`` or ``option=V``); the last one counts."""
    found = None
    for i, arg in enumerate(argv):
        if arg == option and i + 1 < len(argv):
            found = argv[i + 1]
        elif arg.startswith(option + "="):
            found = arg[len(option) + 1 :]
    return found


def _read_dryrun(text: str, env: dict[str, str]) -> tuple[list[tuple[str, list[str]]], str]:
    """The commands of a dryrun (each as its shell line and its arguments) and the lines nvcc
    printed itself; ``env`` takes nvcc's assignments (``CICC_PATH=...``), which it sets for
    every command it runs, in the order they come."""
    messages: list[str] = []
    commands: list[tuple[str, list[str]]] = []
    for line in text.splitlines(keepends=True):
        if not line.startswith(PREFIX):
            messages.append(line)
            continue
        body = line[len(PREFIX) :].rstrip("\r\n")
        if (assignment := _ASSIGNMENT.match(body)) is not None:
            env[assignment.group(1)] = assignment.group(2)
            continue
        words = _split(body, env)
        if not words:
            raise Unrecognized("an empty command")
        commands.append((body, words))
    if not commands:
        raise Unrecognized("no commands")
    return commands, "".join(messages)


@dataclass
class _Command:
    body: str
    tool: str
    files: set[str]
    output: str | None


def _command(body: str, words: list[str], private: str, mention: re.Pattern[str]) -> _Command:
    """What one command is, which files under ``private`` it names and the object it writes."""
    program = os.path.basename(words[0])
    tool = program if program in CUDA_TOOLS else "host"
    files = {m.group(0) for word in words for m in mention.finditer(word)}
    output = None
    if tool == "host":
        target = _value(words, "-o")
        if target is None or ("-c" in words) == ("-E" in words):
            raise Unrecognized(f"{program}: neither a preprocess nor a compile with -o")
        if "-c" in words and target.startswith(private):
            raise Unrecognized(f"{program} -c writes {target} among the intermediates")
        if not target.startswith(private):  # a chain's end: the object, or nvcc -cuda's host .ii
            output = os.path.abspath(target)
            files.add(output)
    for option in CUDA_OUTPUT_OPTIONS if tool != "host" else ():
        target = _value(words, option)
        if target is not None and not target.startswith(private):
            raise Unrecognized(f"{program} writes {target} outside the intermediates")
    return _Command(body, tool, files, output)


def _own_module_id(command: _Command, words: list[str], private: str, argv: Sequence[str]) -> tuple[str, str]:
    """For a cudafe++ command: the module id file and the id to write into it; the command
    is changed to read the file instead of writing it."""
    flag = re.compile(rf" ?(?<!\S){GEN_MODULE_ID}(?!\S)")
    if words.count(GEN_MODULE_ID) != 1 or len(flag.findall(command.body)) != 1:
        raise Unrecognized("cudafe++ does not generate the module id")
    id_file = _value(words, MODULE_ID_FILE)
    source = _value(words, "--orig_src_path_name")
    if id_file is None or not id_file.startswith(private) or source is None:
        raise Unrecognized("cudafe++ names no module id file or no source")
    try:
        content = Path(source).read_bytes()
    except OSError as exc:
        raise Unrecognized(f"cannot read {source}: {exc.strerror}") from None
    command.body = flag.sub("", command.body)
    return id_file, module_id(source, content, argv)


def _chains(commands: list[_Command]) -> list[list[int]]:
    """The commands of each source file, in order: each ends with the compile of its object.
    Sources must not share files (two of the same name would share intermediates)."""
    chains: list[list[int]] = [[]]
    for index, command in enumerate(commands):
        chains[-1].append(index)
        if command.output is not None:
            chains.append([])
    if chains.pop():
        raise Unrecognized("steps after the last object")
    owner: dict[str, int] = {}
    for number, chain in enumerate(chains):
        for path in (path for index in chain for path in commands[index].files):
            if owner.setdefault(path, number) != number:
                raise Unrecognized(f"two sources share {path}")
    return chains


def parse(text: str, private: str, argv: Sequence[str], base_env: dict[str, str]) -> Plan:
    """The plan of nvcc's ``--dryrun`` output ``text`` (its stderr) for ``argv``, whose
    intermediate files lie under ``private`` (a directory path ending in ``/``). Raises
    :class:`Unrecognized`.

    A step waits for each earlier step of its source that names a file it names (so whatever
    it reads is written, and nothing it writes is still to be read), the pre-written module id
    aside; the final compile of a source waits for all of them (it includes files it does not
    name: the stub and the fat binary)."""
    env = dict(base_env)
    lines, messages = _read_dryrun(text, env)
    mention = re.compile(re.escape(private) + r"[^\s,=\"']+")
    commands = [_command(body, words, private, mention) for body, words in lines]
    module_ids: dict[str, str] = {}
    for command, (_, words) in zip(commands, lines, strict=True):
        if command.tool == "cudafe++":
            id_file, own_id = _own_module_id(command, words, private, argv)
            if id_file in module_ids:
                raise Unrecognized("two sources share a module id file")
            module_ids[id_file] = own_id
    for id_file in module_ids:
        users = {command.tool for command in commands if id_file in command.files}
        if users - {"cudafe++", "cicc"}:
            raise Unrecognized(f"the module id file is named by {sorted(users)}")
    steps: list[Step] = []
    for chain in _chains(commands):
        for position, index in enumerate(chain):
            command = commands[index]
            shared = command.files - module_ids.keys()
            earlier = chain[:position]
            if command.output is None:
                earlier = [i for i in earlier if commands[i].files & shared]
            spare = all(commands[i].tool == "host" for i in chain)
            files = frozenset(command.files)
            steps.append(
                Step(index, command.body, command.tool, files, command.output, frozenset(earlier), spare)
            )
    return Plan(tuple(steps), env, module_ids, b"", messages.encode(errors="surrogateescape"))


def _same_file(a: int, b: int) -> bool:
    try:
        sa, sb = os.fstat(a), os.fstat(b)
    except OSError:
        return False
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


def _write(fd: int, data: bytes) -> None:
    stream = sys.stdout if fd == 1 else sys.stderr
    stream.flush()
    if data:
        stream.buffer.write(data)
        stream.buffer.flush()


class _Interrupted(Exception):
    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def execute(plan: Plan, cwd: str | None = None) -> int:
    """Run ``plan``'s steps, each as soon as the steps it waits for are done; return the return
    code of the first step that fails in nvcc's order (as :mod:`subprocess` gives it: ``-N``
    for a step killed by signal N), or 0.

    Host-only sources (``.cpp``) start only while fewer steps run than there are cores: their
    objects are needed only at the link, and on a small machine they would slow the passes of
    the ``.cu`` files, which decide when the compile ends."""
    for path, text in plan.module_ids.items():
        Path(path).write_text(text)
    _write(1, plan.stdout)
    _write(2, plan.stderr)
    merged = _same_file(1, 2)
    steps = plan.steps
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    done: dict[int, _Done] = {}
    running: dict[int, subprocess.Popen[bytes]] = {}
    finished: queue.Queue[tuple[int, _Done]] = queue.Queue()
    first_failure = len(steps)  # index, in nvcc's order, of the first step that failed
    shown = 0  # steps whose output has been passed on

    def wait(index: int, proc: subprocess.Popen[bytes]) -> None:
        out, err = proc.communicate()
        finished.put((index, _Done(proc.returncode, out, err or b"")))

    def stop(index: int) -> None:
        """End a step and whatever it started, whose results nobody will use: SIGKILL, since a
        real cicc has sat in its SIGTERM handler for good (a futex wait) with the pipe of its
        output open, and the compile never ended."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(running[index].pid, signal.SIGKILL)

    try:
        while True:
            for step in sorted(steps[:first_failure], key=lambda step: step.spare):
                if step.index in done or step.index in running or (step.spare and len(running) >= cores):
                    continue
                if all(i in done and done[i].returncode == 0 for i in step.after):
                    proc = subprocess.Popen(
                        # exec: a step killed by a signal is reported as such, not as 128 + N
                        ["/bin/sh", "-c", f"exec {step.command}"],
                        cwd=cwd,
                        env=plan.env,
                        stdin=subprocess.DEVNULL,
                        stdout=subprocess.PIPE,
                        stderr=subprocess.STDOUT if merged else subprocess.PIPE,
                        start_new_session=True,  # stop() ends the step and whatever it started
                    )
                    running[step.index] = proc
                    threading.Thread(target=wait, args=(step.index, proc), daemon=True).start()
            if not running:
                break
            index, result = finished.get()
            del running[index]
            done[index] = result
            if result.returncode != 0 and index < first_failure:
                first_failure = index
                for later in [i for i in running if i > index]:
                    stop(later)
            while shown < first_failure and shown in done:
                _write(1, done[shown].stdout)
                _write(2, done[shown].stderr)
                shown += 1
    except BaseException:
        for index in running:
            stop(index)
        for proc in running.values():
            proc.wait()
        raise
    if first_failure == len(steps):
        return 0
    failed = done[first_failure]
    _write(1, failed.stdout)
    _write(2, failed.stderr)
    for index, result in done.items():  # objects nvcc would not have reached
        output = steps[index].output
        if index > first_failure and result.returncode == 0 and output is not None:
            Path(output).unlink(missing_ok=True)
    return failed.returncode


def _unsupported(argv: Sequence[str]) -> str | None:
    """Why ``argv`` (nvcc and its arguments) is run unchanged, or None."""
    if os.environ.get(DISABLE, "1") == "0":
        return f"{DISABLE}=0"
    args = list(argv[1:])
    for variable in ("NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS"):
        try:
            args += shlex.split(os.environ.get(variable, ""))
        except ValueError:
            return f"{variable} is not understood"
    passed_on = False  # the value of -Xptxas and the like: another tool's options (-Xptxas -v)
    for arg in args:
        option = arg.split("=", 1)[0]
        if option in UNSUPPORTED_OPTIONS and not passed_on:
            return f"option {option}"
        passed_on = (arg.startswith("-X") and "=" not in arg) or arg.endswith("-options")
    if not {"-c", "--compile", "-cuda", "--cuda"} & set(args):
        return "not a compile to objects (-c) or to host code (-cuda)"
    return None


def plan(argv: Sequence[str], private: Path) -> Plan:
    """Ask nvcc for the plan of ``argv`` with its intermediate files in ``private``."""
    if (reason := _unsupported(argv)) is not None:
        raise Unrecognized(reason)
    proc = subprocess.run(
        [*argv, "--dryrun", "--keep", "--keep-dir", str(private)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
    )
    if proc.returncode != 0:
        raise Unrecognized(f"nvcc --dryrun exited with status {proc.returncode}")
    found = parse(proc.stderr.decode(errors="surrogateescape"), str(private) + os.sep, argv, dict(os.environ))
    return dataclasses.replace(found, stdout=proc.stdout)


def _fallback(argv: Sequence[str], reason: str) -> int:
    sys.stderr.write(f"{NOTICE}: running nvcc unchanged ({reason})\n")
    sys.stderr.flush()
    return subprocess.run(list(argv)).returncode


def run(argv: Sequence[str]) -> int:
    """Compile as ``argv`` (``nvcc ARGS``) would, in parallel where the plan allows; the return
    code is nvcc's, or ``-N`` where a step was killed by signal N."""
    private = Path(tempfile.mkdtemp(prefix="tileconform-nvcc-")).resolve()
    try:
        try:
            found = plan(argv, private)
        except Unrecognized as exc:
            return _fallback(argv, str(exc))
        return execute(found)
    finally:
        shutil.rmtree(private, ignore_errors=True)


#: signals whose default action is to stop, continue or ignore, not to end a process
_NOT_FATAL = frozenset(
    {signal.SIGSTOP, signal.SIGTSTP, signal.SIGTTIN, signal.SIGTTOU, signal.SIGCONT}
    | {signal.SIGCHLD, signal.SIGURG, signal.SIGWINCH}
)


def _interrupt(signum: int, _frame: FrameType | None) -> None:
    raise _Interrupted(signum)


def _end_as(returncode: int) -> int:
    """Exit as ``returncode`` says: a step killed by signal N (``-N``) kills this process by N
    too, once everything is cleaned up, so that a caller sees what nvcc would have shown it (a
    compiler killed for memory is a kill, not an exit status a compiler could also give)."""
    if returncode >= 0:
        return returncode
    sys.stdout.flush()
    sys.stderr.flush()
    signum = -returncode
    if signum in _NOT_FATAL:  # cannot have ended the step: as a shell would say it
        return 128 + signum
    if signum != signal.SIGKILL:  # whose action cannot be changed
        with contextlib.suppress(ValueError, OSError):
            signal.signal(signum, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signum})
    os.kill(os.getpid(), signum)
    return 128 + signum  # still here: the signal was blocked or ignored on the way


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        sys.stderr.write(
            f"usage: python -m pytest_tileconform.compile.nvcc_pipeline NVCC [ARGS...]\n{__doc__}"
        )
        return 2
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _interrupt)
    try:
        returncode = run(args)
    except _Interrupted as exc:  # its steps are stopped and its files removed: now end by it
        returncode = -exc.signum
    return _end_as(returncode)


if __name__ == "__main__":
    sys.exit(main())
