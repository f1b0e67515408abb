"""The build cache with a stand-in compiler: keys, publication, cached failures, locking."""

from __future__ import annotations

import json
import os
import shutil
import sys
import threading
import time
from pathlib import Path

import pytest
from helpers.stand_in_compiler import invocations, make_compiler, spec

from pytest_tileconform.compile.cache import BuildCache, BuildSpec, parallel_jobs
from pytest_tileconform.compile.failure import Cause, first_error_line, killed_by


@pytest.fixture
def compiler(tmp_path: Path) -> tuple[Path, Path]:
    script, counter = make_compiler(tmp_path)
    return script, counter


def test_key_covers_source_command_and_salt(compiler: tuple[Path, Path]) -> None:
    base = spec("a\n", compiler)
    assert base.key == spec("a\n", compiler).key
    assert base.key != spec("b\n", compiler).key
    assert base.key != spec("a\n", compiler, salt="nvcc 13.1").key


def test_builds_once_then_hits(tmp_path: Path, compiler: tuple[Path, Path]) -> None:
    cache = BuildCache(tmp_path / "cache")
    specs = [spec("one\n", compiler), spec("two\n", compiler)]
    first = cache.build(specs, jobs=2)
    assert all(r.ok and r.artifact.read_text() in ("one\n", "two\n") for r in first.values())
    again = cache.build(specs, jobs=2)
    assert {k: r.path for k, r in again.items()} == {k: r.path for k, r in first.items()}
    assert sorted(invocations(compiler)) == ["one", "two"]
    # nothing half-written is left beside the entries
    assert not [p for p in (tmp_path / "cache").iterdir() if p.name.startswith(".build-")]


def test_work_beside_a_build_hears_when_its_compilers_start(
    tmp_path: Path, compiler: tuple[Path, Path]
) -> None:
    cache = BuildCache(tmp_path / "cache")
    specs = [spec("one\n", compiler), spec("two\n", compiler)]
    started: list[list[str]] = []
    with cache.telling_compiles(lambda: started.append(invocations(compiler))):
        cache.build(specs, jobs=2)
        assert started == [[]]  # once for the build, before any compile ran
        cache.build(specs, jobs=2)  # nothing to compile: not called
        assert started == [[]]
    cache.build([spec("three\n", compiler)], jobs=1)  # after the block: not told
    assert started == [[]] and "three" in invocations(compiler)


def test_failed_compile_is_cached_with_first_error(tmp_path: Path, compiler: tuple[Path, Path]) -> None:
    cache = BuildCache(tmp_path / "cache")
    bad = spec("FAIL\n", compiler)
    result = cache.build([bad], jobs=1)[bad.key]
    assert not result.ok
    assert "static assertion failed" in result.first_error
    assert json.loads((result.path / "build.json").read_text())["ok"] is False
    assert cache.build([bad], jobs=1)[bad.key].first_error == result.first_error
    assert invocations(compiler) == ["FAIL"]


@pytest.mark.parametrize("claim", [None, 2, 4])
def test_concurrent_builders_never_compile_the_same_entry_twice(
    tmp_path: Path, compiler: tuple[Path, Path], claim: int | None
) -> None:
    specs = [spec(f"case{i}\n", compiler) for i in range(4)]
    results: list[dict[str, object]] = []

    def worker(order: list[BuildSpec]) -> None:
        results.append(dict(BuildCache(tmp_path / "cache").build(order, jobs=1, claim=claim)))

    threads = [threading.Thread(target=worker, args=(order,)) for order in (specs, specs[::-1])]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(invocations(compiler)) == [f"case{i}" for i in range(4)]
    assert results[0].keys() == results[1].keys()


def test_a_builder_claims_in_rounds_or_all_at_once(tmp_path: Path, compiler: tuple[Path, Path]) -> None:
    specs = [spec(f"r{i}\n", compiler) for i in range(4)]
    rounds: list[str] = []
    BuildCache(tmp_path / "rounds", rounds.append).build(specs, jobs=2)
    assert [m for m in rounds if m.startswith("compiling")] == [
        "compiling 2 translation unit(s), 2 at a time"
    ] * 2
    rolling: list[str] = []
    BuildCache(tmp_path / "rolling", rolling.append).build(specs, jobs=2, claim=4)
    assert [m for m in rolling if m.startswith("compiling")] == [
        "compiling 4 translation unit(s), 2 at a time"
    ]


def test_progress_reports_steps(tmp_path: Path, compiler: tuple[Path, Path]) -> None:
    messages: list[str] = []
    BuildCache(tmp_path / "cache", messages.append).build([spec("p\n", compiler)], jobs=1)
    assert messages[0] == "compiling 1 translation unit(s), 1 at a time"
    assert messages[1].startswith("[1/1] p (")


def test_parallel_jobs_bounded_by_memory_and_shared_among_workers(compiler: tuple[Path, Path]) -> None:
    specs = [spec("x\n", compiler)]  # 1 GiB each
    assert parallel_jobs(specs, cores=16, memory=100 << 30) == 16
    assert parallel_jobs(specs, cores=16, memory=4 << 30) == 3  # 85 % of 4 GiB
    assert parallel_jobs(specs, share=4, cores=16, memory=100 << 30) == 4
    assert parallel_jobs(specs, cores=2, memory=1 << 20) == 1


def test_parallel_jobs_count_only_the_cores_this_process_may_use(
    compiler: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under ``taskset -c 0-3`` (or a container's cpuset) a 16-core host offers 4 cores."""
    if not hasattr(os, "sched_getaffinity"):
        pytest.skip("no CPU affinity on this platform")
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    assert parallel_jobs([spec("x\n", compiler)], memory=100 << 30) == 4


def test_a_killed_compile_is_not_cached(tmp_path: Path, compiler: tuple[Path, Path]) -> None:
    """A compiler killed by a signal (the out-of-memory killer) says nothing about the source:
    no entry is published, the result says so, and the next build compiles it again."""
    cache = BuildCache(tmp_path / "cache")
    killed = spec("KILL\n", compiler)
    result = cache.build([killed, spec("ok\n", compiler)], jobs=2)
    failure = result[killed.key].environment
    assert failure is not None and (failure.cause, failure.signal) == (Cause.SIGNAL, 9)
    assert not result[killed.key].ok
    assert cache.lookup(killed) is None
    assert result[spec("ok\n", compiler).key].ok
    cache.build([killed], jobs=1)
    assert invocations(compiler).count("KILL") == 2


def test_an_interrupted_build_keeps_the_units_it_finished(
    tmp_path: Path, compiler: tuple[Path, Path]
) -> None:
    """Ctrl-C (or a CI job's timeout) during a long build: what was done is cached, what was
    still compiling is not, nor a failure (it may be the interrupt's), and the compiles still
    running are stopped."""

    def interrupt_after_two(message: str) -> None:
        if message.startswith("[2/3]"):
            raise KeyboardInterrupt

    done, failed, slow = spec("done\n", compiler), spec("FAIL\n", compiler), spec("SLOW\n", compiler)
    cache = BuildCache(tmp_path / "cache", interrupt_after_two)
    with pytest.raises(KeyboardInterrupt):
        cache.build([done, failed, slow], jobs=3)
    assert cache.lookup(done) is not None and cache.lookup(done).ok  # type: ignore[union-attr]
    assert cache.lookup(failed) is None and cache.lookup(slow) is None
    assert not list((tmp_path / "cache").glob(".build-*"))  # the work folder is gone
    messages: list[str] = []
    BuildCache(tmp_path / "cache", messages.append).build([done], jobs=1)
    assert invocations(compiler).count("done") == 1 and not messages  # no compile the second time


@pytest.mark.parametrize(
    ("log", "signum"),
    [
        ("nvcc error   : 'cicc' died due to signal 9 (Kill signal)\n", 9),
        ("...\ntileconform: build exit status 137\n", 9),
        ("...\ntileconform: build exit status 130\n", 2),
        ("x.cu(3): error: bad\ntileconform: build exit status 1\n", None),
        ("nvcc fatal\ntileconform: build exit status 255\n", None),
        ("", None),
    ],
)
def test_killed_by(log: str, signum: int | None) -> None:
    assert killed_by(log) == signum


def test_first_error_line() -> None:
    log = "ptxas info: used 90 registers\nfoo.cu(3): error: identifier x is undefined\nmore"
    assert first_error_line(log) == "foo.cu(3): error: identifier x is undefined"
    assert first_error_line("") == "compiler failed without output"


def test_linked_entry_leads_to_the_shared_build(tmp_path: Path, compiler: tuple[Path, Path]) -> None:
    cache = BuildCache(tmp_path / "cache")
    shared = spec("shared unit of a and b\n", compiler)
    unit = cache.build([shared], jobs=1)[shared.key]
    case_a = spec("a alone\n", compiler)
    assert cache.lookup(case_a) is None
    cache.link(case_a, unit)
    found = cache.lookup(case_a)
    assert found is not None and found.ok
    assert found.path == unit.path and found.artifact.read_text() == "shared unit of a and b\n"
    # building the case now finds it: nothing is compiled again
    assert cache.build([case_a], jobs=1)[case_a.key].path == unit.path
    assert invocations(compiler) == ["shared unit of a and b"]
    # a link whose unit has gone is no entry: the case is built on its own
    shutil.rmtree(unit.path)
    assert cache.lookup(case_a) is None
    rebuilt = cache.build([case_a], jobs=1)[case_a.key]
    assert rebuilt.ok and rebuilt.artifact.read_text() == "a alone\n"


def test_keys_do_not_depend_on_install_roots(tmp_path: Path, compiler: tuple[Path, Path]) -> None:
    from pytest_tileconform.compile.cache import portable

    script, counter = compiler
    here, there = tmp_path / "here", tmp_path / "there"
    for root in (here, there):
        root.mkdir()
        (root / "fake_nvcc.py").write_text(script.read_text())
    specs = []
    for root in (here, there):
        command, roots = portable(
            (sys.executable, str(root / "fake_nvcc.py"), "{src}", "{out}", str(counter)), {"tools": root}
        )
        assert command[1] == "{tools}/fake_nvcc.py"
        specs.append(BuildSpec("a\n", command, "nvcc 13.0", 1 << 30, "a", roots))
    assert specs[0].key == specs[1].key
    # a cache filled with one install's paths serves the other; a build runs the real path
    cache = BuildCache(tmp_path / "cache")
    built = cache.build([specs[1]], jobs=1)[specs[1].key]
    assert built.ok and built.artifact.read_text() == "a\n"
    assert cache.lookup(specs[0]) == built
    assert json.loads((built.path / "build.json").read_text())["command"][1] == "{tools}/fake_nvcc.py"


def test_an_altered_entry_is_built_again(tmp_path: Path, compiler: tuple[Path, Path]) -> None:
    cache = BuildCache(tmp_path / "cache")
    s = spec("a\n", compiler)
    built = cache.build([s], jobs=1)[s.key]
    built.artifact.write_text("something else\n")
    messages: list[str] = []
    fresh = BuildCache(tmp_path / "cache", messages.append)  # another process
    assert fresh.lookup(s) is None
    assert "fails its checksums" in messages[0]
    rebuilt = fresh.build([s], jobs=1)[s.key]
    assert rebuilt.ok and rebuilt.artifact.read_text() == "a\n"
    assert BuildCache(tmp_path / "cache").lookup(s) is not None
    assert invocations(compiler) == ["a", "a"]


def test_keys_are_those_of_earlier_releases() -> None:
    """Verdict reports are compared through cache reuse: what decides a key must not change
    when entries gain fields (``key``, a signature) or checks."""
    fixed = BuildSpec("src\n", ("nvcc", "{src}", "-o", "{out}"), "salt", 1, "label", (("r", "/x"),), 1.0, 2.0)
    assert fixed.key == "1d0bdc2520c59cc5cc1c135b56b8554f"


def test_entry_records_its_key(tmp_path: Path, compiler: tuple[Path, Path]) -> None:
    s = spec("keyed\n", compiler)
    built = BuildCache(tmp_path / "cache").build([s], jobs=1)[s.key]
    assert json.loads((built.path / "build.json").read_text())["key"] == s.key == built.path.name


def test_a_time_limit_returns_what_was_built_by_then(tmp_path: Path, compiler: tuple[Path, Path]) -> None:
    """Past the deadline the compiles still running are stopped; what ended before it, a
    failure included (it ended by itself), is cached and returned, and nothing more starts."""
    done, failed, slow = spec("done\n", compiler), spec("FAIL\n", compiler), spec("SLOW\n", compiler)
    messages: list[str] = []
    cache = BuildCache(tmp_path / "cache", messages.append)
    built = cache.build([done, failed, slow], jobs=3, deadline=time.monotonic() + 15)
    assert built.keys() == {done.key, failed.key}
    assert built[done.key].ok and not built[failed.key].ok and built[failed.key].environment is None
    assert cache.lookup(failed) is not None and cache.lookup(slow) is None
    assert not list((tmp_path / "cache").glob(".build-*"))
    assert "the build's time limit passed: 2 finished translation unit(s) cached, 1 not" in messages
    later = spec("started after the limit\n", compiler)
    assert cache.build([later, done], jobs=1, deadline=time.monotonic() - 1) == {done.key: built[done.key]}
    assert "started after the limit" not in invocations(compiler)


def test_a_relative_cache_folder_builds(
    tmp_path: Path, compiler: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--tile-cache-dir cache`` or ``TILECONFORM_CACHE_DIR=cache``: ninja runs each compile in
    its own folder, so the paths it is given are absolute."""
    monkeypatch.chdir(tmp_path)
    relative = spec("relative\n", compiler)
    result = BuildCache(Path("cache")).build([relative], jobs=1)[relative.key]
    assert result.ok and result.environment is None, result.first_error


def test_the_suite_builds_into_a_cache_of_its_own() -> None:
    """tests/conftest.py points the plugin at the suite's cache: no test writes into the user's."""
    from pytest_tileconform.compile.cache import default_cache_dir

    home_cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    users = (home_cache / "pytest-tileconform").resolve()
    ours = default_cache_dir().resolve()
    assert ours != users and not ours.is_relative_to(users) and not users.is_relative_to(ours)


def test_a_line_break_in_the_cache_path_is_refused(tmp_path: Path, compiler: tuple[Path, Path]) -> None:
    """No ninja file can hold a line break in a command: one refusal, nothing compiled."""
    from pytest_tileconform.compile.cache import CacheUnusable

    broken = spec("line break\n", compiler)
    with pytest.raises(CacheUnusable, match="holds a line break, which a ninja build file cannot"):
        BuildCache(tmp_path / "cache\nhere").build([broken], jobs=1)
    assert invocations(compiler) == []
