"""The remote tier of the build cache with real parts: a file:// folder, a web server serving it
(http://), and an S3 server (moto's server mode) started here; the stand-in compiler
(helpers.stand_in_compiler) builds the units. Faults: a corrupt object, a wrong signature, a
remote that is down or hangs, a writer killed and a server killed mid-upload; each ends in a
correct result or one line, and leaves nothing bad behind, here or there."""

from __future__ import annotations

import base64
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.fake_backend import BASIC, TileRun
from helpers.paths import REPO
from helpers.stand_in_compiler import invocations, make_compiler, spec

from pytest_tileconform.compile.cache import BuildCache
from pytest_tileconform.compile.caches import open_cache
from pytest_tileconform.compile.remote import RemoteTier, TieredCache, blob_name, manifest_name
from pytest_tileconform.compile.store import TIMEOUT_ENV, RemoteStore
from pytest_tileconform.compile.trust import TrustPolicy

pytest.importorskip("fsspec")


@pytest.fixture
def compiler(tmp_path: Path) -> tuple[Path, Path]:
    script, counter = make_compiler(tmp_path)
    return script, counter


def tiered(
    root: Path, url: str, lines: list[str] | None = None, trust: TrustPolicy | None = None
) -> TieredCache:
    say = (lines if lines is not None else []).append
    return TieredCache(root, say, tier=RemoteTier(RemoteStore(url), say), trust=trust)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, seconds: float = 30.0) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise TimeoutError(f"nothing listens on {port}")


def test_a_unit_built_once_is_fetched_checked_and_run_elsewhere(
    tmp_path: Path, compiler: tuple[Path, Path]
) -> None:
    url = (tmp_path / "remote").as_uri()
    unit = spec("one\n", compiler)
    first = tiered(tmp_path / "a", url).build([unit], jobs=1)[unit.key]
    assert first.ok and invocations(compiler) == ["one"]
    os.chmod(first.artifact, 0o755)  # as nvcc leaves an executable
    tiered(tmp_path / "a2", url).tier.upload(first.path, unit.key)  # already there: nothing
    lines: list[str] = []
    second = tiered(tmp_path / "b", url, lines).build([unit], jobs=1)[unit.key]
    assert invocations(compiler) == ["one"]  # nothing compiled the second time
    assert second.ok and second.artifact.read_text() == "one\n" and lines == []
    assert second.path == tmp_path / "b" / unit.key[:2] / unit.key
    # nothing staged is left beside the entries
    assert not [p for p in (tmp_path / "b").iterdir() if p.name.startswith(".remote-")]


def test_a_case_of_a_shared_unit_travels_with_its_unit(tmp_path: Path, compiler: tuple[Path, Path]) -> None:
    url = (tmp_path / "remote").as_uri()
    shared, case = spec("unit\n", compiler), spec("case\n", compiler)
    writer = tiered(tmp_path / "a", url)
    writer.link(case, writer.build([shared], jobs=1)[shared.key])
    found = tiered(tmp_path / "b", url).lookup(case)
    assert found is not None and found.artifact.read_text() == "unit\n"
    assert invocations(compiler) == ["unit"]


def test_a_compile_error_is_shared_as_the_verdict_it_is(tmp_path: Path, compiler: tuple[Path, Path]) -> None:
    url = (tmp_path / "remote").as_uri()
    bad = spec("FAIL\n", compiler)
    tiered(tmp_path / "a", url).build([bad], jobs=1)
    again = tiered(tmp_path / "b", url).build([bad], jobs=1)[bad.key]
    assert not again.ok and "tile too big" in again.first_error
    assert invocations(compiler) == ["FAIL"]


def test_a_corrupt_object_is_refused_built_again_and_replaced(
    tmp_path: Path, compiler: tuple[Path, Path]
) -> None:
    remote = tmp_path / "remote"
    unit = spec("one\n", compiler)
    tiered(tmp_path / "a", remote.as_uri()).build([unit], jobs=1)
    manifest = json.loads((remote / manifest_name(unit.key)).read_text())
    digest = json.loads(manifest["build.json"])["sha256"]["harness"]
    (remote / blob_name(digest)).write_text("planted\n")
    lines: list[str] = []
    built = tiered(tmp_path / "b", remote.as_uri(), lines).build([unit], jobs=1)[unit.key]
    assert built.ok and built.artifact.read_text() == "one\n"  # built here, never the planted one
    assert invocations(compiler) == ["one", "one"]
    said = lines_about(lines, "remote")
    assert len(said) == 1 and "fails its checksum" in said[0] and "building it again" in said[0]
    assert (remote / blob_name(digest)).read_text() == "one\n"  # the upload put it right
    third = tiered(tmp_path / "c", remote.as_uri()).build([unit], jobs=1)[unit.key]
    assert third.artifact.read_text() == "one\n" and len(invocations(compiler)) == 2


def test_a_manifest_that_lies_about_its_key_is_refused(tmp_path: Path, compiler: tuple[Path, Path]) -> None:
    remote = tmp_path / "remote"
    one, two = spec("one\n", compiler), spec("two\n", compiler)
    tiered(tmp_path / "a", remote.as_uri()).build([one], jobs=1)
    target = remote / manifest_name(two.key)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes((remote / manifest_name(one.key)).read_bytes())  # one's entry filed as two
    lines: list[str] = []
    built = tiered(tmp_path / "b", remote.as_uri(), lines).build([two], jobs=1)[two.key]
    assert built.artifact.read_text() == "two\n" and "names key" in lines_about(lines, "remote")[0]


@pytest.fixture
def keys(tmp_path: Path) -> dict[str, tuple[str, str]]:
    """Two Ed25519 key pairs: (private PEM path, public PEM path) each."""
    pytest.importorskip("cryptography")
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ed25519

    folder = tmp_path / "keys"
    folder.mkdir(mode=0o700)
    pairs = {}
    for name in ("team", "other"):
        key = ed25519.Ed25519PrivateKey.generate()
        private, public = folder / f"{name}.pem", folder / f"{name}.pub"
        private.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
        public.write_bytes(
            key.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )
        private.chmod(0o600)
        pairs[name] = (str(private), str(public))
    return pairs


def test_signed_units_are_used_only_with_the_team_key(
    tmp_path: Path, compiler: tuple[Path, Path], keys: dict[str, tuple[str, str]]
) -> None:
    url = (tmp_path / "remote").as_uri()
    unit = spec("one\n", compiler)
    signer = TrustPolicy.parse(None, signing_key=keys["team"][0])
    tiered(tmp_path / "ci", url, trust=signer).build([unit], jobs=1)
    manifest = json.loads((tmp_path / "remote" / manifest_name(unit.key)).read_text())
    assert base64.b64decode(manifest["signature"])  # the signature travels with the entry
    # a reader with another team's key refuses it, builds it, and does not upload unsigned
    lines: list[str] = []
    other = TrustPolicy.parse(None, verify_key=keys["other"][1])
    built = tiered(tmp_path / "b", url, lines, trust=other).build([unit], jobs=1)[unit.key]
    assert built.ok and len(invocations(compiler)) == 2
    said = lines_about(lines, "remote")
    assert "signature does not match" in said[0] and "stay local" in said[1] and len(said) == 2
    # the team's readers still find the signed one, untouched
    reader = TrustPolicy.parse(None, verify_key=keys["team"][1])
    found = tiered(tmp_path / "c", url, trust=reader).lookup(unit)
    assert found is not None and found.ok and len(invocations(compiler)) == 2


def test_an_unreachable_remote_is_one_line_and_a_local_build(
    tmp_path: Path, compiler: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{free_port()}")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    monkeypatch.setenv(TIMEOUT_ENV, "3")
    lines: list[str] = []
    cache = open_cache(tmp_path / "a", lines.append, "s3://team/cache")
    units = [spec(f"u{i}\n", compiler) for i in range(3)]
    start = time.monotonic()
    built = cache.build(units, jobs=2)
    assert all(r.ok for r in built.values()) and time.monotonic() - start < 30
    said = lines_about(lines, "remote")
    assert len(said) == 1 and "unusable" in said[0], lines


def lines_about(lines: list[str], word: str) -> list[str]:
    return [line for line in lines if word in line]


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A server that takes connections and never answers: a remote that hangs."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield int(server.getsockname()[1])
    stop.set()
    thread.join()
    for s in held:
        s.close()
    server.close()


def test_a_remote_that_hangs_costs_one_timeout(
    tmp_path: Path, compiler: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch, silent_server: int
) -> None:
    monkeypatch.setenv(TIMEOUT_ENV, "2")
    lines: list[str] = []
    cache = open_cache(tmp_path / "a", lines.append, f"http://127.0.0.1:{silent_server}/cache")
    units = [spec(f"u{i}\n", compiler) for i in range(3)]
    start = time.monotonic()
    assert all(r.ok for r in cache.build(units, jobs=2).values())
    assert time.monotonic() - start < 15
    said = lines_about(lines, "remote")
    assert len(said) == 1 and "unusable" in said[0] and "took more than 2 s" in said[0], lines


@pytest.fixture
def web(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A folder served read only over HTTP by Python's own web server."""
    folder = tmp_path / "served"
    folder.mkdir()
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory", str(folder)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_port(port)
        yield folder, f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait()


def test_readers_over_http_fetch_and_never_write(
    tmp_path: Path, compiler: tuple[Path, Path], web: tuple[Path, str]
) -> None:
    folder, url = web
    made, other = spec("one\n", compiler), spec("two\n", compiler)
    tiered(tmp_path / "ci", folder.as_uri()).build([made], jobs=1)
    lines: list[str] = []
    reader = tiered(tmp_path / "dev", url, lines)
    built = reader.build([made, other], jobs=1)
    assert built[made.key].artifact.read_text() == "one\n" and built[other.key].ok
    assert sorted(invocations(compiler)) == ["one", "two"]  # only the missing one compiled here
    assert lines_about(lines, "remote") == [] and not (folder / manifest_name(other.key)).exists()


class Moto:
    """moto's S3 server in a process of its own, which a test can kill."""

    def __init__(self) -> None:
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        moto = Path(sys.executable).parent / "moto_server"
        self.process = subprocess.Popen(
            [str(moto), "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_port(self.port)
        import boto3

        boto3.client("s3", endpoint_url=self.url).create_bucket(Bucket="team")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def kill(self) -> None:
        assert self.process is not None
        self.process.kill()
        self.process.wait()


@pytest.fixture
def moto(monkeypatch: pytest.MonkeyPatch) -> Iterator[Moto]:
    pytest.importorskip("moto")
    pytest.importorskip("s3fs")
    server = Moto()
    monkeypatch.setenv("AWS_ENDPOINT_URL", server.url)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv(TIMEOUT_ENV, "5")
    server.start()
    yield server
    if server.process is not None and server.process.poll() is None:
        server.kill()


def test_s3_concurrent_writers_of_one_unit_leave_one_whole_entry(
    tmp_path: Path, compiler: tuple[Path, Path], moto: Moto
) -> None:
    unit = spec("one\n", compiler)
    errors: list[BaseException] = []

    def write(name: str) -> None:
        try:
            tiered(tmp_path / name, "s3://team/cache").build([unit], jobs=1)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(f"w{i}",)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and invocations(compiler) == ["one", "one"]  # two caches, two builds
    lines: list[str] = []
    found = tiered(tmp_path / "r", "s3://team/cache", lines).lookup(unit)
    assert found is not None and found.artifact.read_text() == "one\n" and lines == []


def test_s3_a_writer_killed_mid_upload_leaves_nothing_visible(
    tmp_path: Path, compiler: tuple[Path, Path], moto: Moto
) -> None:
    """A writer process is killed after its blob is uploaded and before its manifest: readers
    see no entry (not a partial one), build it, and publish a whole one."""
    unit = spec("one\n", compiler)
    script = tmp_path / "writer.py"
    script.write_text(
        "import os, signal, sys\n"
        "from pathlib import Path\n"
        "from pytest_tileconform.compile import store\n"
        "publish = store.RemoteStore.publish\n"
        "def killed(self, source, name):\n"
        "    publish(self, source, name)\n"
        "    if name.startswith('blobs/'):\n"
        "        os.kill(os.getpid(), signal.SIGKILL)\n"
        "store.RemoteStore.publish = killed\n"
        "from helpers.stand_in_compiler import spec\n"
        "from pytest_tileconform.compile.remote import RemoteTier, TieredCache\n"
        "compiler = (Path(sys.argv[1]), Path(sys.argv[2]))\n"
        "tier = RemoteTier(store.RemoteStore('s3://team/cache'), print)\n"
        "cache = TieredCache(Path(sys.argv[3]), print, tier=tier)\n"
        "cache.build([spec('one\\n', compiler)], jobs=1)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO / "tests")}
    writer = subprocess.run(
        [sys.executable, str(script), str(compiler[0]), str(compiler[1]), str(tmp_path / "w")], env=env
    )
    assert writer.returncode == -signal.SIGKILL
    store = RemoteStore("s3://team/cache")
    assert not store.exists(manifest_name(unit.key))
    lines: list[str] = []
    built = tiered(tmp_path / "r", "s3://team/cache", lines).build([unit], jobs=1)[unit.key]
    assert built.ok and lines_about(lines, "remote") == [] and store.exists(manifest_name(unit.key))
    assert tiered(tmp_path / "r2", "s3://team/cache").lookup(unit) is not None


def test_s3_server_killed_mid_upload_is_one_line_and_a_good_local_entry(
    tmp_path: Path, compiler: tuple[Path, Path], moto: Moto, monkeypatch: pytest.MonkeyPatch
) -> None:
    unit, later = spec("one\n", compiler), spec("two\n", compiler)
    lines: list[str] = []
    cache = tiered(tmp_path / "w", "s3://team/cache", lines)
    publish = RemoteStore.publish

    def then_killed(self: RemoteStore, source: Path | bytes, name: str) -> None:
        publish(self, source, name)
        if name.startswith("blobs/"):
            moto.kill()

    monkeypatch.setattr(RemoteStore, "publish", then_killed)
    start = time.monotonic()
    built = cache.build([unit, later], jobs=1)
    assert time.monotonic() - start < 60
    said = lines_about(lines, "remote")
    assert all(r.ok for r in built.values()) and len(said) == 1 and "unusable" in said[0], lines
    assert BuildCache(tmp_path / "w").lookup(unit) is not None  # the local entry is whole
    moto.start()  # a fresh server: the reader builds; nothing half-made reaches it
    monkeypatch.setattr(RemoteStore, "publish", publish)
    fresh = tiered(tmp_path / "r", "s3://team/cache").build([unit], jobs=1)[unit.key]
    assert fresh.ok and fresh.artifact.read_text() == "one\n"


#: A plugin that records the remote settings the FlashInfer backend was built with.
REMOTE_SETTINGS = """
import json

import pytest


@pytest.hookimpl(wrapper=True)
def pytest_tileconform_register_backends(config):
    found = yield
    for backends in found:
        for backend in backends:
            if backend.name == "flashinfer-cutlass-moe":
                s = backend.settings
                record = {"remote": s.cache_remote, "build_on": s.build_on,
                          "cache": type(backend.cache).__name__}
                with open(config.rootpath / "remote.json", "w") as handle:
                    json.dump(record, handle)
    return found
"""


def test_the_remote_comes_from_the_option_the_ini_key_or_the_environment(
    tc: TileRun, monkeypatch: pytest.MonkeyPatch
) -> None:
    tc.pytester.makepyfile(tileremote=REMOTE_SETTINGS)
    tc.pytester.syspathinsert()
    tc.matrix(BASIC)

    def remote(*args: str) -> dict[str, str | None]:
        result = tc.run("-p", "tileremote", "--collect-only", *args)
        assert result.ret == 0, result.stdout.str() + result.stderr.str()
        recorded: dict[str, str | None] = json.loads((tc.path / "remote.json").read_text())
        return recorded

    assert remote() == {"remote": None, "build_on": None, "cache": "BuildCache"}
    monkeypatch.setenv("TILECONFORM_CACHE_REMOTE", (tc.path / "env").as_uri())
    assert remote()["remote"] == (tc.path / "env").as_uri()
    tc.pytester.makeini(f"[pytest]\ntile_cache_remote = {(tc.path / 'ini').as_uri()}\n")
    assert remote() == {"remote": (tc.path / "ini").as_uri(), "build_on": None, "cache": "TieredCache"}
    assert remote("--tile-cache-remote", "file:///x")["remote"] == "file:///x"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--tile-cache-remote", "bucket/prefix"], "is not a URL"),
        (["--tile-cache-remote", "nosuch://x"], "fsspec knows no protocol 'nosuch'"),
        (["--tile-build-on", "ray://head:10001"], "give --tile-cache-remote URL"),
        (["--tile-cache-remote", "file:///x", "--tile-build-on", "http://head"], "ray://HOST:PORT"),
    ],
)
def test_a_remote_or_farm_that_cannot_work_is_one_usage_error(
    tc: TileRun, args: list[str], message: str
) -> None:
    tc.matrix(BASIC)
    result = tc.run("--collect-only", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert message in result.stderr.str() and "Traceback" not in result.stderr.str()
