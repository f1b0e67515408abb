"""The virtual CUDA runtime (pytest_tileconform.virtual), on the CPU.

``runtime/selftest.cu`` is compiled once per session for sm_90a and sm_120a and linked against
vcudart. On the sm90 profile it must print exactly what the same program printed on a real
H200 (``runtime/selftest_h200.jsonl``, recorded by lab/gpu-virtual-selftest.sh); on sm120
the differences must be exactly the ones NVIDIA's published numbers imply. The call-by-call
comparison with the driver is tests/virtual/test_driver_corpus.py.
"""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from pytest_tileconform.flashinfer.harness_report import HarnessReport
from pytest_tileconform.flashinfer.sources import FlashInferSourcesError, find_cuda_home, find_sources
from pytest_tileconform.verdict import Stage
from pytest_tileconform.virtual.build import RUNTIME_SOURCE, build_runtime
from pytest_tileconform.virtual.profiles import (
    BUILTIN,
    ArchProfile,
    ProfileError,
    builtin,
)
from pytest_tileconform.virtual.resources import (
    Image,
    KernelResources,
    ResourceError,
    kernel_table,
    read_images,
    select_image,
)
from pytest_tileconform.virtual.run import VirtualRun, run_virtual, verdict_of

RUNTIME_DIR = RUNTIME_SOURCE.parent
H200 = [json.loads(line) for line in (RUNTIME_DIR / "selftest_h200.jsonl").read_text().splitlines()]


def _cuda_home() -> Path:
    try:
        return find_cuda_home()
    except FlashInferSourcesError as exc:
        pytest.skip(f"needs the CUDA toolkit: {exc}")


@pytest.fixture(scope="session")
def runtime(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_runtime(tmp_path_factory.mktemp("vcudart"), _cuda_home())


@pytest.fixture(scope="session")
def selftest(runtime: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The self-test linked against vcudart, and ptxas's own resource report for it.
    ``--no-compress`` keeps its cubins readable for the kernel table; vcudart is the driver
    too, so neither cudart nor ``-lcuda`` is linked."""
    out = tmp_path_factory.mktemp("selftest") / "selftest"
    cmd = [
        str(_cuda_home() / "bin" / "nvcc"),
        "-O2",
        "--resource-usage",
        "-gencode=arch=compute_90a,code=sm_90a",
        "-gencode=arch=compute_120a,code=sm_120a",
        str(RUNTIME_DIR / "selftest.cu"),
        "-o",
        str(out),
        "--no-compress",
        "--cudart=none",
        str(runtime),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return out, proc.stdout + proc.stderr


def _selftest(
    selftest: tuple[Path, str], profile: ArchProfile, tmp_path: Path
) -> tuple[list[dict[str, Any]], VirtualRun]:
    run = run_virtual(selftest[0], [], tmp_path, profile)
    assert run.returncode == 0, run.stderr
    return [json.loads(line) for line in run.stdout.splitlines()], run


def _by_check(lines: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {line["check"]: line for line in lines}


# -- the runtime against a real H200 -----------------------------------------------------------


def test_sm90_profile_answers_exactly_as_an_h200(selftest: tuple[Path, str], tmp_path: Path) -> None:
    lines, run = _selftest(selftest, builtin("sm90"), tmp_path)
    assert run.image == "sm_90a"
    assert lines == H200


#: A program printing NVIDIA CCCL's ``cuda::arch_traits`` for sm_120 (libcudacxx
#: ``cuda/__device/arch_traits.h``, which encodes the CUDA C++ Programming Guide's "Technical
#: Specifications per Compute Capability"): the SM120 numbers come from there, not from the
#: profile under test.
ARCH_TRAITS_SM120 = """
#include <cuda/__device/arch_traits.h>
#include <cstdio>
int main() {
  constexpr auto t = cuda::arch_traits<cuda::arch_id::sm_120>();
  std::printf("%zu %zu %d %d\\n", (size_t)t.max_shared_memory_per_block_optin,
              (size_t)t.max_shared_memory_per_multiprocessor, t.max_threads_per_multiprocessor,
              t.max_blocks_per_multiprocessor);
}
"""

#: NVIDIA RTX Blackwell GPU architecture whitepaper, table 1 (RTX PRO 6000 Blackwell: 188 SMs,
#: 24,064 CUDA cores); quoted in https://github.com/NVIDIA/cudnn-frontend/pull/1164
RTX_PRO_6000_SMS = 188


def _cccl_sm120(tmp_path: Path) -> dict[str, int]:
    try:
        data = find_sources().root
    except FlashInferSourcesError as exc:
        pytest.skip(f"needs FlashInfer's sources (CCCL): {exc}")
    src = tmp_path / "traits.cpp"
    src.write_text(ARCH_TRAITS_SM120)
    exe = tmp_path / "traits"
    include = [f"-I{data / 'cccl' / d}" for d in ("libcudacxx/include", "cub", "thrust")]
    subprocess.run(
        ["g++", "-std=c++17", *include, f"-I{_cuda_home() / 'include'}", str(src), "-o", str(exe)],
        check=True,
        capture_output=True,
    )
    optin, per_sm, threads, blocks = map(
        int, subprocess.run([str(exe)], capture_output=True, text=True).stdout.split()
    )
    return {
        "MaxSharedMemoryPerBlockOptin": optin,
        "MaxSharedMemoryPerMultiprocessor": per_sm,
        "MaxThreadsPerMultiProcessor": threads,
        "MaxBlocksPerMultiprocessor": blocks,
    }


def test_sm120_differs_from_h200_only_where_nvidias_numbers_do(
    selftest: tuple[Path, str], tmp_path: Path
) -> None:
    """The sm120 profile against the H200's lines: the attributes come from CCCL's arch traits and
    the whitepaper's SM count, not from the profile. The non-portable cluster limit of SM120 is
    published nowhere: the profile assumes the portable 8 (its sources say so), and this only
    checks that vcudart applies that assumption."""
    lines, run = _selftest(selftest, builtin("sm120"), tmp_path)
    assert run.image == "sm_120a"
    expected = _by_check(H200)
    published = {
        **_cccl_sm120(tmp_path),
        "MultiProcessorCount": RTX_PRO_6000_SMS,
        "ComputeCapabilityMajor": 12,
    }
    for check, v in published.items():
        expected[f"attr.{check}"] = {"check": f"attr.{check}", "value": v}
    assert "not published" in builtin("sm120").sources["max_cluster_size_nonportable"]
    refused = {"result": "cudaErrorInvalidClusterSize", "last_error": "cudaErrorInvalidClusterSize"}
    expected["cluster.16x1x1.nonportable"] = {"check": "cluster.16x1x1.nonportable", **refused}
    assert _by_check(lines) == expected


def test_image_for_another_cc_is_no_kernel_image(selftest: tuple[Path, str], tmp_path: Path) -> None:
    """sm_120a code does not run on a 12.1 device (GB10): every use of a kernel says so."""
    lines, run = _selftest(selftest, builtin("sm121"), tmp_path)
    assert run.image == "none"
    checks = _by_check(lines)
    assert checks["smem.dyn.optin"]["result"] == "cudaErrorNoKernelImageForDevice"
    assert checks["launch.plain.1024"]["result"] == "cudaErrorNoKernelImageForDevice"
    assert checks["tma.valid"]["result"] == "CUDA_SUCCESS"  # host-only, needs no kernel


# -- what the log says -------------------------------------------------------------------------


def test_smem_refusal_is_logged_with_request_and_limit(selftest: tuple[Path, str], tmp_path: Path) -> None:
    _, run = _selftest(selftest, builtin("sm120"), tmp_path)
    calls = [
        r for r in run.calls("cudaFuncSetAttribute") if r.get("attr_name") == "MaxDynamicSharedMemorySize"
    ]
    static = [r for r in calls if r["static_smem"] == 8192]
    assert [(r["value"], r["limit"], r["result"]) for r in static] == [
        (101_376 - 8192, 101_376 - 8192, "cudaSuccess"),
        (101_376 - 8191, 101_376 - 8192, "cudaErrorInvalidValue"),
    ]
    assert all(r["optin"] == 101_376 for r in calls)
    assert "opt-in limit" in static[1]["reason"]


def test_launch_and_tma_refusals_say_why(selftest: tuple[Path, str], tmp_path: Path) -> None:
    _, run = _selftest(selftest, builtin("sm90"), tmp_path)
    reasons = {r.get("reason", "") for r in run.refusals}
    for expected in (
        "block exceeds the kernel's __launch_bounds__",
        "grid is not a multiple of the cluster dimension",
        "cluster exceeds the portable cluster size",
        "dynamic shared memory exceeds the kernel's MaxDynamicSharedMemorySize",
        "registers per thread x threads exceed the registers per block",
        "globalAddress must be 16-byte aligned",
        "globalStrides[0] must be a multiple of 16",
        "boxDim[1] must be in [1, 256]",
        "exceeds the swizzle span of 64 bytes",
    ):
        assert any(expected in reason for reason in reasons), expected
    accepted = [r for r in run.launches if r.get("recorded")]
    cluster = next(r for r in accepted if r.get("cluster") == [8, 1, 1])
    assert cluster["grid"] == [16, 1, 1] and cluster["call"] == "cudaLaunchKernelExC"


def test_missing_profile_is_a_loud_failure(selftest: tuple[Path, str]) -> None:
    proc = subprocess.run([str(selftest[0])], capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"})
    assert proc.returncode == 3
    assert "TILECONFORM_VIRTUAL_PROFILE is not set" in proc.stderr


# -- resources from the executable --------------------------------------------------------------


def _ptxas_report(log: str) -> dict[tuple[str, str], tuple[int, int]]:
    """(kernel, arch) -> (registers, static smem) as ptxas --resource-usage printed them."""
    report, current = {}, None
    for line in log.splitlines():
        if m := re.search(r"Compiling entry function '(\S+)' for '(sm_\w+)'", line):
            current = (m.group(1), m.group(2))
        elif current and (m := re.search(r"Used (\d+) registers", line)):
            smem = re.search(r"(\d+) bytes smem", line)
            report[current] = (int(m.group(1)), int(smem.group(1)) if smem else 0)
            current = None
    return report


def test_resources_match_ptxas(selftest: tuple[Path, str]) -> None:
    images = read_images(selftest[0])
    assert sorted(i.label for i in images) == ["sm_120a", "sm_90a"]
    report = _ptxas_report(selftest[1])
    found = {
        (k.name, image.label): (k.registers, k.static_smem)
        for image in images
        for k in image.kernels.values()
    }
    assert found == report
    sm90 = next(i for i in images if i.label == "sm_90a")
    static = next(k for name, k in sm90.kernels.items() if "k_static" in name)
    cluster2 = next(k for name, k in sm90.kernels.items() if "k_cluster2" in name)
    assert (static.static_smem, static.max_threads, cluster2.cluster) == (8192, 384, (2, 1, 1))


def test_compressed_images_are_refused_with_the_fix(tmp_path: Path) -> None:
    src = tmp_path / "k.cu"
    src.write_text("__global__ void k(float* p) { p[threadIdx.x] = 1.f; }\n")
    obj = tmp_path / "k.o"
    subprocess.run(
        [
            str(_cuda_home() / "bin" / "nvcc"),
            "-c",
            "-gencode=arch=compute_90a,code=sm_90a",
            "-Xfatbin=-compress-all",
            str(src),
            "-o",
            str(obj),
        ],
        check=True,
        capture_output=True,
    )
    with pytest.raises(ResourceError, match="--no-compress"):
        read_images(obj)


@pytest.mark.parametrize(
    ("images", "cc", "chosen"),
    [
        ([Image("cubin", 90, "a"), Image("cubin", 120, "a")], 90, "sm_90a"),
        ([Image("cubin", 90, "a")], 100, None),  # arch-specific: exact cc only
        ([Image("cubin", 120, "")], 121, "sm_120"),  # plain cubin: later minors of its major
        ([Image("cubin", 100, "f")], 103, "sm_100f"),  # family: later minors of its major
        ([Image("cubin", 100, "f")], 120, None),
        ([Image("cubin", 90, ""), Image("ptx", 90, "")], 100, "compute_90"),  # PTX JIT forward
        ([Image("ptx", 120, "a")], 121, None),
        ([Image("cubin", 120, ""), Image("cubin", 120, "a"), Image("ptx", 120, "")], 120, "sm_120a"),
    ],
)
def test_image_selection(images: list[Image], cc: int, chosen: str | None) -> None:
    image = select_image(images, cc)
    assert (image.label if image else None) == chosen


def test_the_kernel_table_holds_every_fat_binarys_kernels() -> None:
    """A unit's kernels and its harness are two translation units, so two fat binaries: the
    driver loads an image from each, and the table lists the kernels of both."""
    kernels = [KernelResources(name, 90, 0, 128, 0, 0, None) for name in ("gemm", "fill")]
    images = [
        Image("cubin", 90, "a", {"fill": kernels[1]}, container=0),
        Image("cubin", 90, "a", {"gemm": kernels[0]}, container=1),
    ]
    table = kernel_table(images, 90).splitlines()
    assert table[0] == "image sm_90a" and len(table) == 3
    assert {line.split()[1] for line in table[1:]} == {"gemm", "fill"}
    assert kernel_table([*images, Image("cubin", 120, "a", container=2)], 90) == "image none\n"


# -- profiles ----------------------------------------------------------------------------------


def test_profile_keys_are_the_runtimes() -> None:
    source = RUNTIME_SOURCE.read_text()
    keys = re.search(r"kProfileKeys\[\] = \{(.*?)\};", source, re.S)
    assert keys is not None
    runtime_keys = set(re.findall(r'"(\w+)"', keys.group(1)))
    for profile in BUILTIN.values():
        written = {
            line.split("=")[0] for line in profile.profile_text().splitlines() if not line.startswith("#")
        }
        assert written == runtime_keys
        assert set(profile.sources) >= written - {"name", "cc_major", "cc_minor", "integrated"}


def test_builtin_numbers() -> None:
    assert builtin("sm90").max_smem_per_block_optin == 232_448
    assert builtin("sm120").max_smem_per_block_optin == builtin("sm121").max_smem_per_block_optin == 101_376
    assert (builtin("sm120").sm_count, builtin("sm121").sm_count, builtin("sm100").sm_count) == (188, 48, 148)
    assert builtin("sm103").sm == 103


@pytest.mark.parametrize(
    ("arch", "change", "message"),
    [
        ("sm120", {"max_smem_per_block_optin": 102_400}, "exceed max_smem_per_sm"),
        ("sm90", {"sm_count": 0}, "sm_count must be positive"),
        ("sm90", {"max_cluster_size_nonportable": 4}, "max_cluster_size_nonportable <"),
        ("sm121", {"integrated": 2}, "integrated must be 0 or 1"),
        ("sm90", {"gpc_sms": (18, 18)}, "must be positive and add up to sm_count"),
    ],
)
def test_impossible_profile_numbers_are_refused(arch: str, change: dict[str, Any], message: str) -> None:
    with pytest.raises(ProfileError, match=re.escape(message)):
        dataclasses.replace(builtin(arch), **change)


def test_an_unknown_profile_names_the_known_ones() -> None:
    with pytest.raises(ProfileError, match=re.escape("no built-in profile 'sm77'; known: sm90")):
        builtin("sm77")


# -- verdicts from a virtual harness run --------------------------------------------------------


def _run(stage: str, refusals: list[dict[str, Any]] | None = None) -> tuple[VirtualRun, HarnessReport]:
    smem_call = {
        "call": "cudaFuncSetAttribute",
        "attr_name": "MaxDynamicSharedMemorySize",
        "value": 200_000,
        "limit": 101_376,
        "result": "cudaErrorInvalidValue" if stage == "initialize" else "cudaSuccess",
        "reason": "dynamic + static shared memory exceed the device's opt-in limit per block",
    }
    report = {
        "final": True,
        "stage": stage,
        "status": "Error Internal" if stage == "initialize" else "Success",
        "smem_requested": 200_000,
        "workspace_bytes": 4096,
        "message": "",
    }
    return VirtualRun(1, "", "", "sm_120a", [smem_call, *(refusals or [])]), HarnessReport(report)


def test_verdict_of_initialize_refusal() -> None:
    verdict = verdict_of(*_run("initialize"), "virtual sm120")
    assert verdict.failed_stage is Stage.INITIALIZE and verdict.judged_through is Stage.LAUNCH
    assert (verdict.smem_requested, verdict.smem_limit, verdict.workspace_bytes) == (200_000, 101_376, 4096)
    assert "opt-in limit" in verdict.detail


def test_verdict_of_pass_is_judged_through_launch() -> None:
    verdict = verdict_of(*_run("pass"), "virtual sm90")
    assert verdict.passed and verdict.judged_through is Stage.LAUNCH


def test_verdict_of_unchecked_launch_refusal() -> None:
    launch = {"call": "<<<>>>", "result": "cudaErrorInvalidValue", "reason": "block exceeds"}
    verdict = verdict_of(*_run("run", [launch]), "virtual sm90")
    assert verdict.failed_stage is Stage.LAUNCH


def test_verdict_detail_leads_with_the_deciding_refusal_and_counts_repeats() -> None:
    placeholder = {
        "call": "cuTensorMapEncodeTiled",
        "result": "CUDA_ERROR_INVALID_VALUE",
        "reason": "NULL globalAddress",
    }
    run, report = _run("initialize", [placeholder, placeholder, placeholder])
    run.log = [placeholder, *run.log, placeholder]  # the refusals around the deciding one
    detail = verdict_of(run, report, "virtual sm120").detail
    assert detail.startswith("cudaFuncSetAttribute: dynamic + static shared memory exceed")
    assert detail.endswith("; cuTensorMapEncodeTiled: NULL globalAddress (x5)")
