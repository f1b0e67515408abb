"""Architecture profiles of the virtual device: every number the virtual runtime answers with.

Each built-in number names its source. Sources, abbreviated below:

* ``cccl``: NVIDIA CCCL ``cuda/__device/arch_traits.h`` (libcudacxx ``cuda::arch_traits``,
  CCCL 3.6 as shipped in flashinfer-python 0.7.4), which encodes the CUDA C++ Programming
  Guide's "Technical Specifications per Compute Capability" table;
* ``cutlass``: CUTLASS ``include/cutlass/arch/arch.h`` (``sm100_smem_capacity_bytes``,
  ``sm120_smem_capacity_bytes``);
* ``h200``: ``cudaGetDeviceProperties`` / ``cudaDeviceGetAttribute`` on an NVIDIA H200
  (driver 580.159.04, CUDA 13.0);
* ``product``: NVIDIA's product specifications of the named GPU;
* ``nominal``: no judged host decision depends on it; a plausible value;
* ``corpus``: the driver conformance corpus recorded on an H200
  (``virtual/conformance/driver-corpus-h200.jsonl.gz``, lab/gpu-driver-corpus.sh), which
  vcudart's sm90 profile must reproduce call for call (tests/virtual/test_driver_corpus.py);
* ``cute``: CUTLASS ``include/cute/arch/copy_sm90_desc.hpp`` ``to_CUtensorMapDataType`` and
  ``to_CUtensorMapSwizzle``, which the SM100/SM120 collectives use to encode FP4/FP6 operands
  (16U4/16U6 types) and 128B_ATOM swizzles: no driver record of those devices is in the project.

The arch-dependent rules are the fields without a default: each profile names the source of
each (``sources``), and only ``corpus`` is a record of a driver's answers.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ..archs import arch_name
from ..verdict import Device

KIB = 1024


class ProfileError(ValueError):
    """No such profile, or numbers no GPU could have (the message says which and why)."""


@dataclass(frozen=True)
class ArchProfile:
    """One virtual GPU. Field names are the keys of the runtime's profile file. Its numbers are
    checked when it is made, so a mistyped built-in number fails at import, not in a verdict."""

    name: str
    cc_major: int
    cc_minor: int
    sm_count: int
    max_smem_per_block_optin: int  # cudaDevAttrMaxSharedMemoryPerBlockOptin
    max_smem_per_sm: int
    max_threads_per_sm: int
    max_blocks_per_sm: int
    max_cluster_size_nonportable: int  # with cudaFuncAttributeNonPortableClusterSizeAllowed
    total_global_mem: int
    l2_cache_bytes: int
    # How the driver places thread block clusters (cudaOccupancyMaxActiveClusters, cooperative
    # cluster launches): a cluster's blocks go to distinct SMs of one GPC, at most
    # cluster_blocks_per_sm of them on an SM. gpc_sms lists the SMs of each GPC; () = unknown,
    # and vcudart then treats all sm_count SMs as one GPC (no cluster is ever split off).
    gpc_sms: tuple[int, ...]
    cluster_blocks_per_sm: int
    integrated: int = 0
    max_smem_per_block: int = 48 * KIB  # without opt-in
    reserved_smem_per_block: int = KIB
    regs_per_block: int = 64 * KIB
    regs_per_sm: int = 64 * KIB
    max_threads_per_block: int = 1024
    max_block_dim_x: int = 1024
    max_block_dim_y: int = 1024
    max_block_dim_z: int = 64
    max_grid_dim_x: int = 2**31 - 1
    max_grid_dim_y: int = 65535
    max_grid_dim_z: int = 65535
    warp_size: int = 32
    max_cluster_size_portable: int = 8
    total_constant_mem: int = 64 * KIB
    driver_version: int = 13000  # what cudaDriverGetVersion answers
    # cuTensorMapEncode*: 1 if the device accepts the packed 16U4/16U6 data types, and the
    # CU_TENSOR_MAP_SWIZZLE_128B_ATOM_* swizzles
    tma_packed_types: int = 1
    tma_swizzle_atom: int = 1
    sources: Mapping[str, str] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        may_be_zero = ("cc_minor", "integrated", "tma_packed_types", "tma_swizzle_atom")
        positive = [f.name for f in dataclasses.fields(self) if f.type == "int" and f.name not in may_be_zero]
        for name in positive:
            if getattr(self, name) <= 0:
                raise ProfileError(f"{self.name}: {name} must be positive, got {getattr(self, name)}")
        if self.max_smem_per_block_optin + self.reserved_smem_per_block > self.max_smem_per_sm:
            raise ProfileError(
                f"{self.name}: max_smem_per_block_optin ({self.max_smem_per_block_optin}) + "
                f"reserved_smem_per_block ({self.reserved_smem_per_block}) exceed max_smem_per_sm "
                f"({self.max_smem_per_sm})"
            )
        if self.max_cluster_size_nonportable < self.max_cluster_size_portable:
            raise ProfileError(f"{self.name}: max_cluster_size_nonportable < max_cluster_size_portable")
        if self.gpc_sms and (min(self.gpc_sms) <= 0 or sum(self.gpc_sms) != self.sm_count):
            raise ProfileError(
                f"{self.name}: gpc_sms {self.gpc_sms} must be positive and add up to "
                f"sm_count ({self.sm_count})"
            )
        for flag in ("integrated", "tma_packed_types", "tma_swizzle_atom"):
            if getattr(self, flag) not in (0, 1):
                raise ProfileError(f"{self.name}: {flag} must be 0 or 1")

    @property
    def sm(self) -> int:
        """Compute capability as a number: 9.0 -> 90, 12.1 -> 121."""
        return self.cc_major * 10 + self.cc_minor

    @property
    def arch(self) -> str:
        return arch_name(self.sm)

    @property
    def device(self) -> Device:
        """What a verdict judged on this profile names as its device."""
        return Device("virtual", f"virtual {self.arch}", self.arch, f"{self.cc_major}.{self.cc_minor}")

    def profile_text(self) -> str:
        """The key=value file the runtime reads (TILECONFORM_VIRTUAL_PROFILE)."""
        lines = [f"# {self.name} ({self.arch}), written by pytest_tileconform.virtual.profiles"]
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, tuple):
                lines.append(f"{f.name}={','.join(map(str, value))}")
            elif f.name != "sources":
                lines.append(f"{f.name}={value}")
        return "\n".join(lines) + "\n"

    def write(self, path: Path) -> Path:
        path.write_text(self.profile_text())
        return path


_COMMON = {
    "max_smem_per_block": "cccl (48 KiB for every arch)",
    "reserved_smem_per_block": "cccl (1 KiB from cc 8.0); h200",
    "regs_per_block": "cccl; h200",
    "regs_per_sm": "cccl; h200",
    "max_threads_per_block": "cccl; h200",
    "max_block_dim_x": "cccl",
    "max_block_dim_y": "cccl",
    "max_block_dim_z": "cccl; h200",
    "max_grid_dim_x": "cccl; h200",
    "max_grid_dim_y": "cccl; h200",
    "max_grid_dim_z": "cccl",
    "warp_size": "cccl; h200",
    "max_cluster_size_portable": "CUDA C++ Programming Guide, Thread Block Clusters (8 is portable)",
    "total_constant_mem": "cccl; h200",
    "driver_version": "nominal: a CUDA 13.0 driver",
}

#: vcudart refuses a TMA box larger than the opt-in shared memory per block: the sm90 corpus shows
#: that limit there; on other archs it is extrapolated, not recorded.
_BOX_LIMIT = "also the largest TMA box (as the sm90 corpus shows; not recorded on this arch)"

#: The cluster placement of archs without a driver record: not published, not recorded.
_PLACEMENT_UNKNOWN = {
    "gpc_sms": "unknown (not published, no driver corpus): vcudart counts clusters as if one GPC "
    "held every SM, so it may count more clusters than the device places",
    "cluster_blocks_per_sm": "as the sm90 corpus (8); not recorded on this arch",
}

_TMA_FROM_CUTE = {
    "tma_packed_types": "cute (the FP4/FP6 collectives encode them); not in a driver corpus",
    "tma_swizzle_atom": "cute (the SM100 collectives encode them); not in a driver corpus",
}

BUILTIN: dict[str, ArchProfile] = {
    "sm90": ArchProfile(
        name="NVIDIA H200",
        cc_major=9,
        cc_minor=0,
        sm_count=132,
        max_smem_per_block_optin=232_448,
        max_smem_per_sm=228 * KIB,
        max_threads_per_sm=2048,
        max_blocks_per_sm=32,
        max_cluster_size_nonportable=16,
        total_global_mem=150_109_880_320,
        l2_cache_bytes=60 * KIB * KIB,
        gpc_sms=(18, 18, 16, 16, 16, 16, 16, 8, 2, 2, 2, 2),
        cluster_blocks_per_sm=8,
        tma_packed_types=0,
        tma_swizzle_atom=0,
        sources={
            **_COMMON,
            "sm_count": "h200; product (H100 SXM and H200: 132 SMs)",
            "max_smem_per_block_optin": "cccl (228 KiB - 1 KiB); h200; corpus (also the largest TMA box)",
            "max_smem_per_sm": "cccl; h200",
            "max_threads_per_sm": "cccl; h200",
            "max_blocks_per_sm": "cccl; h200",
            "max_cluster_size_nonportable": "h200 (16 launches, 32 is refused)",
            "total_global_mem": "h200",
            "l2_cache_bytes": "h200",
            "gpc_sms": "corpus, fitted: the only split of the 132 SMs into GPCs under which every "
            "recorded cudaOccupancyMaxActiveClusters answer and cooperative cluster launch is the sum "
            "over GPCs of floor(SMs x min(blocks/SM, 8) / cluster size) for GPCs of at least cluster "
            "size SMs. One block/SM: 132 clusters of 1, 66 of 2, 39 of 3, 30 of 4, 17 of 6, 15 of 8, "
            "7 of 16, 0 of 32; two: 79 of 3, 62 of 4, 30 of 8, 14 of 16; three: 62 of 6; four: 124 "
            "of 4, 62 of 8, 28 of 16; five: 203 of 3, 154 of 4, 77 of 8; seven: 107 of 8; eight or "
            "more: 248 of 4, 124 of 8, 58 of 16. The four 2-SM entries are what the answers require: "
            "8 SMs that hold clusters of 1 or 2 blocks and none larger (as SM pairs: Hopper's TPCs "
            "are); searched over every split with GPCs of at most 18 SMs (Hopper's GPC)",
            "cluster_blocks_per_sm": "corpus: 12, 16, 21 and 32 blocks/SM give the answers of 8 "
            "(1,056 clusters of 1, 528 of 2, 248 of 4, 124 of 8, 58 of 16)",
            "tma_packed_types": "corpus (every 16U4/16U6 descriptor refused)",
            "tma_swizzle_atom": "corpus (every 128B_ATOM_* descriptor refused)",
        },
    ),
    "sm100": ArchProfile(
        name="NVIDIA B200",
        cc_major=10,
        cc_minor=0,
        sm_count=148,
        max_smem_per_block_optin=232_448,
        max_smem_per_sm=228 * KIB,
        max_threads_per_sm=2048,
        max_blocks_per_sm=32,
        max_cluster_size_nonportable=16,
        total_global_mem=180 * 10**9,
        l2_cache_bytes=126 * KIB * KIB,
        gpc_sms=(),
        cluster_blocks_per_sm=8,
        sources={
            **_COMMON,
            "sm_count": "product (B200: 148 SMs)",
            "max_smem_per_block_optin": "cutlass sm100_smem_capacity_bytes; cccl; " + _BOX_LIMIT,
            "max_smem_per_sm": "cccl",
            "max_threads_per_sm": "cccl",
            "max_blocks_per_sm": "cccl",
            "max_cluster_size_nonportable": "CUTLASS SM100 kernels launch up to 16-CTA clusters",
            "total_global_mem": "nominal (B200 180 GB)",
            "l2_cache_bytes": "nominal",
            **_TMA_FROM_CUTE,
            **_PLACEMENT_UNKNOWN,
        },
    ),
    "sm103": ArchProfile(
        name="NVIDIA B300",
        cc_major=10,
        cc_minor=3,
        sm_count=148,
        max_smem_per_block_optin=232_448,
        max_smem_per_sm=228 * KIB,
        max_threads_per_sm=2048,
        max_blocks_per_sm=32,
        max_cluster_size_nonportable=16,
        total_global_mem=270 * 10**9,
        l2_cache_bytes=126 * KIB * KIB,
        gpc_sms=(),
        cluster_blocks_per_sm=8,
        sources={
            **_COMMON,
            "sm_count": "product (B300 as B200: 148 SMs; not verified on hardware)",
            "max_smem_per_block_optin": "cccl (sm_103 = sm_100 traits); " + _BOX_LIMIT,
            "max_smem_per_sm": "cccl",
            "max_threads_per_sm": "cccl",
            "max_blocks_per_sm": "cccl",
            "max_cluster_size_nonportable": "as sm100 (not verified on hardware)",
            "total_global_mem": "nominal (B300 288 GB class)",
            "l2_cache_bytes": "nominal",
            **_TMA_FROM_CUTE,
            **_PLACEMENT_UNKNOWN,
        },
    ),
    "sm120": ArchProfile(
        name="NVIDIA RTX PRO 6000 Blackwell",
        cc_major=12,
        cc_minor=0,
        sm_count=188,
        max_smem_per_block_optin=101_376,
        max_smem_per_sm=100 * KIB,
        max_threads_per_sm=1536,
        max_blocks_per_sm=24,
        max_cluster_size_nonportable=8,
        total_global_mem=96 * 10**9,
        l2_cache_bytes=128 * KIB * KIB,
        gpc_sms=(),
        cluster_blocks_per_sm=8,
        sources={
            **_COMMON,
            "sm_count": "product (RTX PRO 6000 Blackwell: 188 SMs)",
            "max_smem_per_block_optin": "cutlass sm120_smem_capacity_bytes; cccl (100 KiB - 1 KiB); "
            + _BOX_LIMIT,
            "max_smem_per_sm": "cccl",
            "max_threads_per_sm": "cccl",
            "max_blocks_per_sm": "cccl",
            "max_cluster_size_nonportable": "not published: assumed portable only (8)",
            "total_global_mem": "nominal (96 GB)",
            "l2_cache_bytes": "product (128 MB)",
            **_TMA_FROM_CUTE,
            **_PLACEMENT_UNKNOWN,
        },
    ),
    "sm121": ArchProfile(
        name="NVIDIA GB10 (DGX Spark)",
        cc_major=12,
        cc_minor=1,
        sm_count=48,
        max_smem_per_block_optin=101_376,
        max_smem_per_sm=100 * KIB,
        max_threads_per_sm=1536,
        max_blocks_per_sm=24,
        max_cluster_size_nonportable=8,
        total_global_mem=128 * 10**9,
        l2_cache_bytes=24 * KIB * KIB,
        gpc_sms=(),
        cluster_blocks_per_sm=8,
        integrated=1,
        sources={
            **_COMMON,
            "sm_count": "product (GB10: 48 SMs)",
            "max_smem_per_block_optin": "cccl (sm_121 = sm_120 traits); cutlass sm120; " + _BOX_LIMIT,
            "max_smem_per_sm": "cccl",
            "max_threads_per_sm": "cccl",
            "max_blocks_per_sm": "cccl",
            "max_cluster_size_nonportable": "not published: assumed portable only (8)",
            "total_global_mem": "nominal (128 GB unified memory)",
            "l2_cache_bytes": "nominal",
            "integrated": "product (unified CPU/GPU memory)",
            **_TMA_FROM_CUTE,
            **_PLACEMENT_UNKNOWN,
        },
    ),
}


def builtin(arch: str) -> ArchProfile:
    """The built-in profile for ``sm90``, ``sm100``, ``sm103``, ``sm120`` or ``sm121``."""
    try:
        return BUILTIN[arch]
    except KeyError:
        raise ProfileError(f"no built-in profile {arch!r}; known: {', '.join(BUILTIN)}") from None
