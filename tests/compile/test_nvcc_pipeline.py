"""nvcc_pipeline: nvcc's passes side by side, giving nvcc's objects, nvcc's errors and exit
status, and nvcc itself when the plan is not one it knows.

The scheduling is checked with stand-in tools on a dryrun written here (no CUDA, well under a
second); the rest compiles a few-line ``.cu`` with the real nvcc (about a second each) and is
skipped without one.
"""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
import time
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_tileconform.compile import nvcc_pipeline
from pytest_tileconform.compile.cache import UNIT_SOURCE
from pytest_tileconform.compile.failure import first_error_line
from pytest_tileconform.compile.nvcc_pipeline import Plan, Unrecognized, execute, module_id, parse
from pytest_tileconform.flashinfer.backend import Settings
from pytest_tileconform.flashinfer.codegen import HARNESS_PART

# ------------------------------------------------------------------------------------------
# stand-in tools: every one logs when it starts and ends, says hello on stderr, checks the
# module id where nvcc's would read it, writes the files its options name, and sleeps or fails
# when FAKE_SLEEP / FAKE_FAIL ("cicc=3,ptxas=1") name it, or is killed by the signal FAKE_KILL
# names ("cicc=9"); FAKE_DEAF ("cicc=1") ignores SIGTERM

FAKE_TOOL = """
import os, pathlib, signal, sys, time
name = os.path.basename(sys.argv[0])
args = sys.argv[1:]
def setting(var):
    pairs = (item.split("=") for item in os.environ.get(var, "").split(",") if item)
    return dict(pairs).get(name)
def log(event):
    with open(os.environ["FAKE_LOG"], "a") as handle:
        handle.write(f"{time.monotonic():.3f} {name} {event}\\n")
log("start")
if setting("FAKE_DEAF"):  # as the real cicc can be: its SIGTERM handler has deadlocked
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
if "--module_id_file_name" in args:
    id_file = pathlib.Path(args[args.index("--module_id_file_name") + 1])
    log("reads-module-id " + (id_file.read_text() if id_file.exists() else "MISSING"))
time.sleep(float(setting("FAKE_SLEEP") or 0))
print(f"{name} says hello", file=sys.stderr)
if (signum := setting("FAKE_KILL")) is not None:  # as the kernel's OOM killer ends a compiler
    log("end")
    os.kill(os.getpid(), int(signum))
if (code := setting("FAKE_FAIL")) is not None:
    print(f"{name}: error: it failed", file=sys.stderr)
    log("end")
    sys.exit(int(code))
outputs = ("-o", "--gen_c_file_name", "--create", "--embedded-fatbin")
for option in outputs + (("--stub_file_name",) if name == "cicc" else ()):  # cudafe++'s: a name
    for i, arg in enumerate(args[:-1]):
        if arg == option:
            pathlib.Path(args[i + 1]).write_text(name)
    for arg in args:
        if arg.startswith(option + "="):
            pathlib.Path(arg.split("=", 1)[1]).write_text(name)
log("end")
"""

# what nvcc --dryrun --keep prints for "nvcc -c x.cu y.cpp -odir OUT" (CUDA 13.0), reduced
DRYRUN = "".join(
    f"#$ {line}\n"
    for line in (
        "_NVVM_BRANCH_=nvvm",
        "_SPACE_= ",
        "CICC_PATH={bin}",
        "PATH={bin}:{path}",
        'fakecc -std=c++17 -E -x c++ "{src}/x.cu" -o "{p}x.cpp4.ii" ',
        'cudafe++ --c++17 --orig_src_file_name "x.cu" --orig_src_path_name "{src}/x.cu" '
        '--gen_c_file_name "{p}x.cudafe1.cpp" --stub_file_name "x.cudafe1.stub.c" --gen_module_id_file '
        '--module_id_file_name "{p}x.module_id" "{p}x.cpp4.ii" ',
        'fakecc -std=c++17 -D__CUDA_ARCH__=900 -E -x c++ "{src}/x.cu" -o "{p}x.cpp1.ii" ',
        '"$CICC_PATH/cicc" --c++17 -arch compute_90a --include_file_name "x.fatbin.c" '
        '--module_id_file_name "{p}x.module_id" --stub_file_name "{p}x.cudafe1.stub.c" "{p}x.cpp1.ii" '
        '-o "{p}x.ptx"',
        'ptxas -arch=sm_90a -m64  "{p}x.ptx"  -o "{p}x.cubin" ',
        'fatbinary --create="{p}x.fatbin" -64 "--image3=kind=elf,sm=90a,file={p}x.cubin" '
        '--embedded-fatbin="{p}x.fatbin.c" ',
        'fakecc -std=c++17 -c -x c++ "{p}x.cudafe1.cpp" -o "{out}/x.o" ',
        'fakecc -std=c++17 -c -x c++ "{src}/y.cpp" -o "{out}/y.o" ',
    )
)
TOOLS = ("fakecc", "cudafe++", "cicc", "ptxas", "fatbinary")


@dataclasses.dataclass
class Fake:
    root: Path  # bin/ (the tools), src/, private/, out/
    text: str  # the dryrun
    private: str  # the intermediates' directory, ending in /
    out: Path
    log: Path

    def plan(self) -> Plan:  # the steps run in the environment of this moment, as nvcc's
        return parse(self.text, self.private, ["nvcc", "-c", "x.cu", "y.cpp"], dict(os.environ))

    def events(self) -> list[tuple[float, str, str]]:
        rows = [line.split(" ", 2) for line in self.log.read_text().splitlines()]
        return [(float(t), event, name) for t, name, event in rows]

    def span(self, name: str) -> tuple[float, float]:
        times = [t for t, event, tool in self.events() if tool == name and event in ("start", "end")]
        return times[0], times[-1]


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Fake:
    bin_dir, src, private, out = (tmp_path / d for d in ("bin", "src", "private", "out"))
    for directory in (bin_dir, src, private, out):
        directory.mkdir()
    script = bin_dir / "fake_tool.py"
    script.write_text(f"#!{sys.executable}\n{FAKE_TOOL}")
    script.chmod(0o755)
    for tool in TOOLS:
        (bin_dir / tool).symlink_to(script)
    (src / "x.cu").write_text("__global__ void k() {}\n")
    (src / "y.cpp").write_text("int y;\n")
    log = tmp_path / "log"
    monkeypatch.setenv("FAKE_LOG", str(log))
    monkeypatch.chdir(tmp_path)  # where the steps run
    text = DRYRUN.format(bin=bin_dir, path=os.environ["PATH"], src=src, p=f"{private}/", out=out)
    return Fake(tmp_path, text, f"{private}/", out, log)


def test_plan_of_a_dryrun(fake: Fake) -> None:
    plan = fake.plan()
    assert [s.tool for s in plan.steps] == [
        "host",
        "cudafe++",
        "host",
        "cicc",
        "ptxas",
        "fatbinary",
        "host",
        "host",
    ]
    # cudafe++ waits for the host preprocessor only, the device branch for nothing on the host
    # side; the object waits for all of its source's steps; y.cpp for nothing, on a spare core
    assert [sorted(s.after) for s in plan.steps] == [[], [0], [], [2], [3], [4], [0, 1, 2, 3, 4, 5], []]
    assert [s.spare for s in plan.steps] == [False] * 7 + [True]
    assert "--gen_module_id_file" not in plan.steps[1].command
    assert plan.steps[1].command.count("--module_id_file_name") == 1
    assert [s.output for s in plan.steps if s.output] == [f"{fake.out}/x.o", f"{fake.out}/y.o"]
    assert plan.env["CICC_PATH"] == str(fake.root / "bin")
    assert plan.env["_SPACE_"] == " "  # as nvcc sets it: the text after "=", as it is
    source = str(fake.root / "src" / "x.cu")
    (id_file, written), *more = plan.module_ids.items()
    assert not more and id_file == f"{fake.private}x.module_id"
    assert re.fullmatch(rf"_{zlib.crc32(source.encode()):08x}_4_x_cu_[0-9a-f]{{16}}", written)


def test_passes_run_side_by_side(
    fake: Fake, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FAKE_SLEEP", "cudafe++=1,cicc=1")
    plan = fake.plan()
    assert execute(plan) == 0
    # side by side: each started before the other ended (their own logs, not the wall time of the
    # whole plan, which a loaded machine stretches)
    cudafe, cicc = fake.span("cudafe++"), fake.span("cicc")
    assert cicc[0] < cudafe[1] and cudafe[0] < cicc[1]
    # both read the id written beforehand; nothing that nvcc writes is missing
    (written,) = plan.module_ids.values()
    reads = [event for _, event, _ in fake.events() if event.startswith("reads-module-id")]
    assert reads == [f"reads-module-id {written}"] * 2
    assert (fake.out / "x.o").read_text() == "fakecc" and (fake.out / "y.o").exists()
    # what the tools printed comes in nvcc's order, whatever order they ran in
    err = capfd.readouterr().err
    assert (
        re.findall(r"(\S+) says hello", err)
        == ["fakecc", "cudafe++", "fakecc", "cicc", "ptxas", "fatbinary"] + ["fakecc"] * 2
    )


def test_the_first_failure_in_nvcc_order_decides(
    fake: Fake, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    # cicc fails first in time, but cudafe++ comes first in nvcc's order and fails too
    monkeypatch.setenv("FAKE_SLEEP", "cudafe++=0.5")
    monkeypatch.setenv("FAKE_FAIL", "cudafe++=2,cicc=3")
    assert execute(fake.plan()) == 2
    err = capfd.readouterr().err
    assert err.splitlines()[-1] == "cudafe++: error: it failed"
    assert "cicc" not in err
    assert first_error_line(err) == "cudafe++: error: it failed"
    assert not list(fake.out.iterdir())  # nvcc stops at the failure: y.cpp never compiled


def test_a_failure_stops_what_comes_after_it(
    fake: Fake, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FAKE_SLEEP", "cudafe++=0.5,fakecc=0.2")
    monkeypatch.setenv("FAKE_FAIL", "cicc=3")
    assert execute(fake.plan()) == 3
    err = capfd.readouterr().err
    # the steps before cicc in nvcc's order (cudafe++ included) ran and printed; after it, none
    assert re.findall(r"(\S+) says hello", err) == ["fakecc", "cudafe++", "fakecc", "cicc"]
    assert err.splitlines()[-1] == "cicc: error: it failed"
    assert "ptxas" not in {name for _, _, name in fake.events()}
    assert not list(fake.out.iterdir())  # nor y.o, even if it was compiled meanwhile


def test_a_step_killed_by_a_signal_is_reported_as_a_kill(
    fake: Fake, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """A compiler killed for memory is the host's trouble, never a compile error: the step's
    kill (not the 128 + N a shell around it would say) reaches the caller, and what runs after
    it in nvcc's order is stopped."""
    monkeypatch.setenv("FAKE_KILL", "cicc=9")
    assert execute(fake.plan()) == -9
    assert "ptxas" not in {name for _, _, name in fake.events()}
    assert not list(fake.out.iterdir())
    assert "Killed" not in capfd.readouterr().err  # no shell stood between: it said nothing


@pytest.mark.parametrize("signum", [9, 15])
def test_the_command_dies_by_the_signal_that_killed_its_step(tmp_path: Path, signum: int) -> None:
    """Through the command line, as ninja and the release probe run it: a compiler that dies by
    a signal makes the pipeline die by it too, here through nvcc unchanged (the stand-in has no
    --dryrun), its temporary folder removed first."""
    nvcc = tmp_path / "nvcc"
    nvcc.write_text(
        f"#!{sys.executable}\nimport os, sys\n"
        "if '--dryrun' in sys.argv: sys.exit('nvcc fatal   : no dryrun here')\n"
        f"os.kill(os.getpid(), {signum})\n"
    )
    nvcc.chmod(0o755)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    proc = pipeline_cli([str(nvcc), "-c", "x.cu"], tmp_path, TMPDIR=str(tmp))
    assert proc.returncode == -signum, proc.stderr
    assert "running nvcc unchanged" in proc.stderr
    assert not list(tmp.iterdir())


def test_a_step_that_ignores_sigterm_is_stopped_all_the_same(
    fake: Fake, monkeypatch: pytest.MonkeyPatch
) -> None:
    """cudafe++ fails while cicc runs beside it. A real cicc once sat in its SIGTERM handler
    (a futex wait) for good, holding the pipe of its output open, and the compile never ended;
    the pipeline must end a step whatever the step does with the signal."""
    monkeypatch.setenv("FAKE_SLEEP", "cudafe++=0.5,cicc=60")
    monkeypatch.setenv("FAKE_FAIL", "cudafe++=2")
    monkeypatch.setenv("FAKE_DEAF", "cicc=1")
    started = time.monotonic()
    assert execute(fake.plan()) == 2
    assert time.monotonic() - started < 10


@pytest.mark.parametrize(
    ("old", "new", "reason"),
    [
        ("--gen_module_id_file ", "", "cudafe.. does not generate the module id"),
        ("#$ _SPACE_", "#$ -- Filter Dependencies -- > x.d\n#$ _SPACE_", "shell operator"),
        ("#$ _SPACE_", "#$ ptxas x.ptx -o x.cubin\n#$ _SPACE_", "ptxas writes x.cubin outside"),
        ('-o "', '-O "', "fakecc: neither a preprocess nor a compile"),
        ("--orig_src_path_name", "--source", "no module id file or no source"),
        ('"{p}x.ptx"  -o', '"{p}x.module_id"  -o', "the module id file is named by"),
        ('"{src}/y.cpp"', '"{p}x.cpp4.ii"', "two sources share"),
        ("", '#$ ptxas "{p}z.ptx" -o "{p}z.cubin"\n', "steps after the last object"),
    ],
)
def test_plans_it_does_not_know(fake: Fake, old: str, new: str, reason: str) -> None:
    fill = {"p": fake.private, "src": str(fake.root / "src")}
    old, new = old.format(**fill), new.format(**fill)
    text = fake.text.replace(old, new) if old else fake.text + new
    assert text != fake.text
    with pytest.raises(Unrecognized, match=reason):
        parse(text, fake.private, ["nvcc", "-c", "x.cu"], dict(os.environ))


@pytest.mark.parametrize(
    ("args", "env", "reason"),
    [
        (["-c", "x.cu", "-Xptxas", "-v"], {}, None),  # ptxas's -v: its report comes in nvcc's order
        (["-c", "x.cu", "--ptxas-options", "-v", "-Xptxas=-v"], {}, None),
        (["-c", "x.cu", "-v"], {}, "option -v"),  # nvcc's own: it prints the commands as they run
        (["-c", "x.cu", "--keep-dir=k"], {}, "option --keep-dir"),
        (["-c", "x.cu"], {"NVCC_APPEND_FLAGS": "--dryrun"}, "option --dryrun"),
        (["-c", "x.cu"], {"NVCC_PREPEND_FLAGS": "'"}, "NVCC_PREPEND_FLAGS is not understood"),
        (["x.cu", "-o", "x"], {}, "not a compile to objects (-c) or to host code (-cuda)"),
        (["-c", "x.cu"], {"TILECONFORM_NVCC_PIPELINE": "0"}, "TILECONFORM_NVCC_PIPELINE=0"),
    ],
)
def test_options_it_leaves_to_nvcc(
    args: list[str], env: dict[str, str], reason: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS", "TILECONFORM_NVCC_PIPELINE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert nvcc_pipeline._unsupported(["nvcc", *args]) == reason


# ------------------------------------------------------------------------------------------
# with the real nvcc

KERNEL = "__global__ void scale(float* x) { x[threadIdx.x] *= 2.0f; }\n"
# internal-linkage device symbols are named after the module id: _INTERNAL_<id>..., _GLOBAL__N_<id>
INTERNAL = """namespace { __device__ int hits; }
static __device__ float bias;
__global__ void count(float* x) { atomicAdd(&hits, 1); x[0] += bias; }
"""
MAIN = """#include <cstdio>
__global__ void scale(float* x);
int helper();
int main() { std::printf("%d\\n", helper()); scale<<<1, 1>>>(nullptr); return 0; }
"""
BROKEN = "__global__ void k(float* x) { x[0] = undefined_thing; }\n"
FLAGS = ["-std=c++17", "--threads=1", "-O3", "-gencode=arch=compute_90a,code=sm_90a", "--no-compress"]


@pytest.fixture(scope="module")
def nvcc() -> str:
    from pytest_tileconform.flashinfer.sources import FlashInferSourcesError, find_cuda_home

    try:
        return str(find_cuda_home() / "bin" / "nvcc")
    except FlashInferSourcesError as exc:
        pytest.skip(f"needs nvcc: {exc}")


@pytest.fixture
def sources(tmp_path: Path) -> Path:
    for name, text in {
        "kernel.cu": KERNEL,
        "internal.cu": INTERNAL,
        "main.cu": MAIN,
        "broken.cu": BROKEN,
        "helper.cpp": "int helper() { return 3; }\n",
    }.items():
        (tmp_path / name).write_text(text)
    for objects in ("plain", "piped"):  # nvcc makes no -odir
        (tmp_path / objects).mkdir()
    return tmp_path


def pipeline_cli(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """``python -m pytest_tileconform.compile.nvcc_pipeline ARGS``, with this checkout's module."""
    path = str(Path(nvcc_pipeline.__file__).parents[1])
    return subprocess.run(
        [sys.executable, "-m", "pytest_tileconform.compile.nvcc_pipeline", *args],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": path, **env},
        capture_output=True,
        text=True,
    )


def fatbin(obj: Path) -> bytes:
    out = obj.with_suffix(".nv_fatbin")
    subprocess.run(["objcopy", "-O", "binary", "--only-section=.nv_fatbin", str(obj), str(out)], check=True)
    return out.read_bytes()


def test_objects_are_nvccs_given_its_module_id(
    nvcc: str, sources: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the module id nvcc itself chose, every object is byte for byte nvcc's (nvcc with
    --keep names its intermediates as the pipeline does: they are named in the objects)."""
    args = [nvcc, *FLAGS, "-c", "internal.cu", "helper.cpp", "-odir"]
    keep = sources / "keep"
    keep.mkdir()
    subprocess.run([*args, "plain", "--keep", "--keep-dir", str(keep)], cwd=sources, check=True)
    nvcc_id = (keep / "internal.module_id").read_text()
    private = sources / "private"
    private.mkdir()
    monkeypatch.chdir(sources)
    plan = nvcc_pipeline.plan([*args, "piped"], private)
    (own_id,) = plan.module_ids.values()
    assert execute(dataclasses.replace(plan, module_ids=dict.fromkeys(plan.module_ids, nvcc_id))) == 0
    for name in ("internal.o", "helper.o"):
        assert (sources / "piped" / name).read_bytes() == (sources / "plain" / name).read_bytes(), name
    # nvcc's id and ours agree up to the suffix, which only nvcc's front end knows
    prefix = f"_{zlib.crc32(str(sources / 'internal.cu').encode()):08x}_11_internal_cu_"
    assert nvcc_id.startswith(prefix) and own_id.startswith(prefix) and own_id != nvcc_id
    assert own_id == module_id(str(sources / "internal.cu"), INTERNAL.encode(), [*args, "piped"])


def test_compiles_and_links_as_nvcc(nvcc: str, sources: Path) -> None:
    args = [*FLAGS, "-c", "kernel.cu", "main.cu", "helper.cpp", "-odir"]
    proc = pipeline_cli([nvcc, *args, "piped"], sources)
    assert proc.returncode == 0 and proc.stdout == "" and proc.stderr == "", proc.stderr
    subprocess.run([nvcc, *args, "plain"], cwd=sources, check=True)
    objects = [sources / "piped" / f"{name}.o" for name in ("kernel", "main", "helper")]
    subprocess.run([nvcc, *map(str, objects), "-o", str(sources / "program")], check=True)
    assert (sources / "program").stat().st_size > 0
    # no internal-linkage device symbol here, so the module id is nowhere in the device code
    assert fatbin(objects[0]) == fatbin(sources / "plain" / "kernel.o")


def test_host_code_as_nvcc_cuda_writes_it(nvcc: str, sources: Path) -> None:
    """``-cuda`` (the release probe's front ends) ends in a host preprocess outside the
    intermediates: run side by side, its .ii is nvcc's but for the intermediates' names."""
    proc = pipeline_cli([nvcc, *FLAGS, "-cuda", "kernel.cu", "-o", "piped.ii"], sources)
    assert proc.returncode == 0 and "nvcc-pipeline" not in proc.stderr, proc.stderr
    subprocess.run([nvcc, *FLAGS, "-cuda", "kernel.cu", "-o", "plain.ii"], cwd=sources, check=True)

    def text(name: str) -> list[str]:  # less line markers and the temporary files' names
        lines = (sources / name).read_text().splitlines()
        return [
            line
            for line in lines
            if not line.startswith("#") and "tmpxft" not in line and "tileconform-nvcc" not in line
        ]

    assert text("piped.ii") == text("plain.ii") and len(text("plain.ii")) > 1000
    broken = pipeline_cli([nvcc, *FLAGS, "-cuda", "broken.cu", "-o", "broken.ii"], sources)
    assert broken.returncode == 2 and "undefined_thing" in first_error_line(broken.stderr)


def test_a_compile_error_reads_as_nvccs(nvcc: str, sources: Path) -> None:
    args = [nvcc, *FLAGS, "-c", "broken.cu", "helper.cpp", "-odir", "out"]
    (sources / "out").mkdir()
    plain = subprocess.run(args, cwd=sources, capture_output=True, text=True)
    # the backend's own form: this interpreter, isolated, running the module's file
    piped = subprocess.run(
        [sys.executable, "-I", nvcc_pipeline.__file__, *args], cwd=sources, capture_output=True, text=True
    )
    assert plain.returncode == 2 and piped.returncode == plain.returncode
    assert (piped.stdout, piped.stderr) == (plain.stdout, plain.stderr)
    assert 'identifier "undefined_thing" is undefined' in first_error_line(piped.stderr)
    assert not list((sources / "out").iterdir())  # helper.o, if compiled meanwhile, is removed
    # into one file, as the build cache logs it
    with (sources / "build.log").open("w") as log:
        status = subprocess.run(
            [sys.executable, "-I", nvcc_pipeline.__file__, *args], cwd=sources, stdout=log, stderr=log
        )
    assert status.returncode == 2
    assert (sources / "build.log").read_text() == plain.stderr


@pytest.mark.parametrize(
    ("extra", "env", "reason"),
    [
        (["-MD"], {}, "shell operator in '-- Filter Dependencies -- > kernel.d'"),  # a step it does not know
        ([], {"TILECONFORM_NVCC_PIPELINE": "0"}, "TILECONFORM_NVCC_PIPELINE=0"),
        (["--keep"], {}, "option --keep"),
        (["--no-such-option"], {}, "nvcc --dryrun exited with status 1"),
    ],
)
def test_nvcc_unchanged_when_the_plan_is_unknown(
    nvcc: str, sources: Path, extra: list[str], env: dict[str, str], reason: str
) -> None:
    args = [nvcc, *FLAGS, *extra, "-c", "kernel.cu", "-o", "kernel.o"]
    proc = pipeline_cli(args, sources, **env)
    notice, *rest = proc.stderr.splitlines(keepends=True)
    assert notice == f"nvcc-pipeline: running nvcc unchanged ({reason})\n"
    made = {p.name for p in sources.glob("kernel.[od]")}
    for path in sources.glob("kernel.[od]"):
        path.unlink()
    plain = subprocess.run(args, cwd=sources, capture_output=True, text=True)
    assert (proc.returncode, "".join(rest), proc.stdout) == (plain.returncode, plain.stderr, plain.stdout)
    assert made == {p.name for p in sources.glob("kernel.[od]")}
    assert ("kernel.o" in made) == (plain.returncode == 0) and ("kernel.d" in made) == ("-MD" in extra)
    if plain.returncode:  # the notice is never taken for the error
        assert first_error_line(proc.stderr) == first_error_line(plain.stderr)


def test_the_backend_compiles_through_the_pipeline(
    nvcc: str, tmp_path: Path, backend_settings: Callable[..., Settings]
) -> None:
    from helpers.codegen import base

    from pytest_tileconform.flashinfer import backend, buildscript
    from pytest_tileconform.flashinfer.sources import FlashInferSourcesError, find_sources

    try:
        find_sources()
    except FlashInferSourcesError as exc:
        pytest.skip(str(exc))
    settings = backend_settings(cache_dir=tmp_path)
    flashinfer = backend.FlashInferBackend(settings, progress=lambda _msg: None)
    flashinfer._toolchain = (Path(nvcc).parents[1], "salt", tmp_path / "vcudart" / "libvcudart.a")
    built = flashinfer._command(base(), True)
    (shell, flag, script, zeroth, out, nvcc_arg, runtime, macro, unit, *compile_cmd), roots = built
    assert (shell, flag, script, zeroth, out) == ("sh", "-c", buildscript.SCRIPT, "sh", "{out}")
    assert (nvcc_arg, runtime) == ("{cuda}/bin/nvcc", "{cache}/vcudart/libvcudart.a")
    assert (macro, unit) == (HARNESS_PART, UNIT_SOURCE)  # the harness apart
    assert flashinfer._command(base(), False)[0][7] == ""  # together: no second translation unit
    # the script runs the compile as its arguments ("$@"), each path one argument
    assert compile_cmd[:4] == ["{python}", "-I", "{tileconform}/nvcc_pipeline.py", "{cuda}/bin/nvcc"]
    assert "-c" in compile_cmd and "{src}" in compile_cmd and '"$@" -odir "$objdir"' in script
    # the key names no install path: the interpreter and this checkout are placeholders
    command = " ".join(flashinfer._command(base(), True)[0])
    assert buildscript.PYTHON not in command and str(buildscript.PIPELINE_SCRIPT.parent) not in command
    assert dict(roots)["python"] == buildscript.PYTHON
    assert Path(dict(roots)["tileconform"]) / "nvcc_pipeline.py" == buildscript.PIPELINE_SCRIPT
