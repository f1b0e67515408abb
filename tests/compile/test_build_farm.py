"""Units compiled on a real two-node Ray cluster (``ray start --head`` and a worker node, one CPU
each, started here), landing in a file:// remote tier, then used by a fresh cache that compiles
nothing; a Ray worker killed mid-compile is retried elsewhere and ends in the right unit; a farm
that cannot be reached is one line. The stand-in compiler (helpers.stand_in_compiler) builds."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from filelock import FileLock
from helpers.stand_in_compiler import invocations, make_compiler, spec

from pytest_tileconform.compile.cache import BuildResult
from pytest_tileconform.compile.remote import RemoteTier, TieredCache
from pytest_tileconform.compile.store import RemoteStore

ray = pytest.importorskip("ray")
pytest.importorskip("fsspec")

MARK = "TILECONFORM_TEST_RAY_CLUSTER"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class Cluster:
    address: str
    folder: Path
    caches: Path  # each node's local build cache, node0 and node1
    mark: str

    def processes(self) -> list[int]:
        """This cluster's processes: those whose environment carries its mark."""
        found = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    if f"{MARK}={self.mark}".encode() in (entry / "environ").read_bytes().split(b"\0"):
                        found.append(int(entry.name))
                except OSError:
                    continue
        return found


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    folder = Path(tempfile.mkdtemp(prefix="tcray", dir="/tmp"))  # Ray's sockets need a short path
    caches = Path(tempfile.mkdtemp(prefix="tcray-caches-"))  # Ray makes its folder writable by all
    mark = uuid.uuid4().hex
    gcs, client = free_port(), free_port()
    ray_cli = str(Path(sys.executable).parent / "ray")
    common = ["--num-cpus", "1", "--object-store-memory", "80000000", "--node-ip-address", "127.0.0.1"]
    # the nodes' own environment, not the test process's (pytest's and xdist's variables)
    kept = ("PATH", "HOME", "LANG", "TMPDIR", "VIRTUAL_ENV")
    base = {k: v for k, v in os.environ.items() if k in kept} | {MARK: mark, "RAY_USAGE_STATS_ENABLED": "0"}
    nodes = [
        [
            "--head",
            "--port",
            str(gcs),
            "--ray-client-server-port",
            str(client),
            "--temp-dir",
            str(folder),
            "--include-dashboard=false",
        ],
        ["--address", f"127.0.0.1:{gcs}"],
    ]
    found = Cluster(f"ray://127.0.0.1:{client}", folder, caches, mark)
    # one cluster on the host at a time (pytest-xdist's other worker waits): Ray Client's proxies
    # take their clients' ports from 23000 up and two clusters' proxies race for them
    one_at_a_time = FileLock(Path(tempfile.gettempdir()) / "tileconform-test-ray-cluster.lock")
    one_at_a_time.acquire()
    try:
        for i, args in enumerate(nodes):
            env = {**base, "TILECONFORM_CACHE_DIR": str(caches / f"node{i}")}
            subprocess.run([ray_cli, "start", *args, *common], env=env, check=True, capture_output=True)
        for attempt in range(3):  # Ray Client's proxy forks a server per client, which gRPC's
            try:  # epoll poller can crash on a loaded host ("Check failed: ... KICKED")
                ray.init(address=found.address, logging_level="ERROR", log_to_driver=False)
                break
            except ConnectionError:
                if attempt == 2:
                    raise
                ray.shutdown()
        end = time.monotonic() + 60  # the worker node registers after its `ray start` returns
        while sum(n["Alive"] for n in ray.nodes()) < 2 and time.monotonic() < end:
            time.sleep(0.2)
        yield found
    finally:
        if ray.is_initialized():
            ray.shutdown()
        for pid in found.processes():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(folder, ignore_errors=True)
        shutil.rmtree(caches, ignore_errors=True)
        one_at_a_time.release()


def test_the_farm_builds_into_the_remote_and_a_fresh_cache_compiles_nothing(
    tmp_path: Path, cluster: Cluster
) -> None:
    from pytest_tileconform.compile.farm import RayFarm

    compiler = make_compiler(tmp_path)
    url = (tmp_path / "remote").as_uri()
    units = [spec("one\n", compiler), spec("two\n", compiler), spec("FAIL three\n", compiler)]
    lines: list[str] = []
    farm = RayFarm(cluster.address, most_at_once=2)
    assert farm.capacity()[0] == 2  # two nodes of one CPU: what the planner plans units for
    driver = TieredCache(
        tmp_path / "driver", lines.append, tier=RemoteTier(RemoteStore(url), lines.append), farm=farm
    )
    built = driver.build(units, jobs=1)
    assert sorted(invocations(compiler)) == ["FAIL three", "one", "two"]  # each once, on the farm
    assert sum("compiled on the farm" in line for line in lines) == 3, lines
    assert any(line.endswith("2 at a time") for line in lines)  # --tile-build-jobs 2
    assert built[units[0].key].artifact.read_text() == "one\n"
    assert not built[units[2].key].ok and "tile too big" in built[units[2].key].first_error
    # the nodes built in their own caches, not in the driver's
    assert any((cluster.caches / f"node{i}").exists() for i in range(2))
    # a second process with an empty local cache judges from the remote with no compile
    fresh = TieredCache(tmp_path / "judge", tier=RemoteTier(RemoteStore(url), print))
    again = fresh.build(units, jobs=1)
    assert len(invocations(compiler)) == 3
    assert [again[u.key].ok for u in units] == [True, True, False]


def test_a_worker_killed_mid_compile_is_retried_and_nothing_is_poisoned(
    tmp_path: Path, cluster: Cluster
) -> None:
    from pytest_tileconform.compile.farm import RayFarm

    compiler = make_compiler(tmp_path)
    url = (tmp_path / "remote").as_uri()
    unit = spec("PAUSE one\n", compiler)
    lines: list[str] = []
    driver = TieredCache(
        tmp_path / "driver",
        lines.append,
        tier=RemoteTier(RemoteStore(url), lines.append),
        farm=RayFarm(cluster.address),
    )
    results: list[dict[str, BuildResult]] = []
    thread = threading.Thread(target=lambda: results.append(driver.build([unit], jobs=1)))
    thread.start()
    pid_file = compiler[1].with_suffix(".pid")
    end = time.monotonic() + 60
    while not pid_file.exists() and time.monotonic() < end:
        time.sleep(0.1)
    worker = task_worker(int(pid_file.read_text()))
    os.kill(worker, signal.SIGKILL)  # the Ray worker running the task, mid-compile
    thread.join(timeout=120)
    assert not thread.is_alive() and results, lines
    assert invocations(compiler) == ["PAUSE one", "PAUSE one"]  # compiled again after the kill
    assert results[0][unit.key].artifact.read_text() == "PAUSE one\n"
    found = TieredCache(tmp_path / "judge", tier=RemoteTier(RemoteStore(url), print)).lookup(unit)
    assert found is not None and found.artifact.read_text() == "PAUSE one\n"


def task_worker(pid: int) -> int:
    """The Ray worker process above the compiler ``pid`` (ninja runs it for the task)."""
    while pid > 1:
        stat = Path(f"/proc/{pid}/stat").read_text()
        pid = int(stat.rpartition(")")[2].split()[1])
        if Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"ray::"):
            return pid
    raise AssertionError("no Ray worker above the compiler")


def test_a_farm_that_cannot_be_reached_is_one_line(tmp_path: Path) -> None:
    script = (
        "from pytest_tileconform.compile.farm import FarmError, RayFarm\n"
        "try:\n"
        "    RayFarm('ray://127.0.0.1:1').capacity()\n"
        "except FarmError as exc:\n"
        "    print(exc)\n"
    )
    env = {**os.environ, "RAY_CLIENT_INITIAL_CONNECTION_TIMEOUT_S": "1"}
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.stdout.strip().startswith("the build farm ray://127.0.0.1:1 cannot be reached")
    assert "Traceback" not in done.stderr
