"""Per-kernel resource usage, read from the device code embedded in a host object or executable.

The virtual runtime must know what the driver would know when it loads a kernel: registers per
thread, static shared memory, ``__launch_bounds__``, compile-time cluster dimensions. That is
all in the cubins nvcc embeds in the host ELF's ``.nv_fatbin`` section, so it is read from
there, in Python, with no CUDA tool (cuobjdump is not part of nvcc's minimal install):

* fat binary container: header ``magic 0xBA55ED50, version u16, header size u16, size u64``,
  then entries ``kind u16 (1 PTX, 2 ELF), version u16, header size u32, payload size u64``;
  the entry header's word 7 is the SM number and word 10 holds the flags, where 0x100000 marks
  an arch-specific (``sm_90a``) and 0x200000 a family-specific (``sm_100f``) image (as nvcc
  13.0 writes them; tests/virtual/test_virtual_runtime.py checks both);
* each cubin is an ELF file: the kernels are the functions with a ``.nv.info.<name>``
  section; registers come from ``EIATTR_REGCOUNT`` (0x2f) in ``.nv.info``, launch bounds from
  ``EIATTR_MAX_THREADS`` (0x05), cluster dims from ``EIATTR_CTA_PER_CLUSTER`` (0x3d), the
  stack frame from ``EIATTR_FRAME_SIZE`` (0x11), constant bank 0 from the size of
  ``.nv.constant0.<name>``, static shared memory from the size of ``.nv.shared.<name>``.

From sm_90 on, ptxas puts the 1 KiB each block reserves for the system
(``cudaDevAttrReservedSharedMemoryPerBlock``) at the start of ``.nv.shared.<name>``; the
driver reports static shared memory without it (an H200 reports 8192 bytes for a kernel
whose section is 9216 bytes), so it is subtracted here.

Images must be stored uncompressed: FlashInfer compiles with ``-Xfatbin=-compress-all``, so
the virtual build adds ``--no-compress``, which leaves the device code itself unchanged.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

FATBIN_MAGIC = 0xBA55ED50
ENTRY_PTX, ENTRY_ELF = 1, 2
FLAG_ARCH_SPECIFIC = 0x100000
FLAG_FAMILY_SPECIFIC = 0x200000
RESERVED_SMEM_IN_SECTION = 1024  # sm_90+: reserved smem laid out inside .nv.shared.<kernel>

EIATTR_MAX_THREADS = 0x05
EIATTR_FRAME_SIZE = 0x11
EIATTR_REGCOUNT = 0x2F
EIATTR_CTA_PER_CLUSTER = 0x3D
EIFMT_NVAL, EIFMT_BVAL, EIFMT_HVAL, EIFMT_SVAL = 1, 2, 3, 4

Variant = Literal["", "a", "f"]


class ResourceError(RuntimeError):
    """The device code cannot be read (no fat binary, compressed images, malformed ELF)."""


@dataclass(frozen=True)
class KernelResources:
    """What the driver learns about one kernel when it loads its cubin."""

    name: str  # mangled device name, as __cudaRegisterFunction passes it
    registers: int
    static_smem: int  # bytes, without the reserved system area (as cudaFuncGetAttributes)
    max_threads: int  # __launch_bounds__ max threads per block; 0: none
    local_bytes: int  # stack frame per thread
    const_bytes: int  # constant bank 0 (kernel parameters and driver constants)
    cluster: tuple[int, int, int] | None  # __cluster_dims__, if any

    def table_line(self) -> str:
        fields = [
            f"registers={self.registers}",
            f"static_smem={self.static_smem}",
            f"max_threads={self.max_threads}",
            f"local_bytes={self.local_bytes}",
            f"const_bytes={self.const_bytes}",
        ]
        if self.cluster:
            fields.append("cluster=" + ",".join(map(str, self.cluster)))
        return f"kernel {self.name} " + " ".join(fields)


@dataclass(frozen=True)
class Image:
    """One entry of a fat binary: a cubin for ``sm_<arch><variant>`` or PTX for ``compute_...``."""

    kind: Literal["cubin", "ptx"]
    arch: int  # 90, 100, 120, ...
    variant: Variant
    kernels: dict[str, KernelResources] = field(default_factory=dict)  # cubins only
    #: which fat binary of the program holds it (one per translation unit with device code):
    #: the driver chooses an image in each
    container: int = 0

    @property
    def label(self) -> str:
        prefix = "sm" if self.kind == "cubin" else "compute"
        return f"{prefix}_{self.arch}{self.variant}"

    def runs_on(self, cc: int) -> bool:
        """Whether the driver can use this image on a device of compute capability ``cc``
        (90 for 9.0), per the CUDA compatibility rules: a cubin runs on its major version
        from its minor up, PTX is JIT-compiled for any later device, an ``a`` image only on its
        exact capability, an ``f`` image on later minors of its major (its family)."""
        if self.variant == "a":
            return cc == self.arch
        if self.kind == "cubin" or self.variant == "f":
            return cc // 10 == self.arch // 10 and cc >= self.arch
        return cc >= self.arch


def select_image(images: list[Image], cc: int) -> Image | None:
    """The image the driver loads for compute capability ``cc``: a compatible cubin before
    PTX, the newest compatible arch first, an arch-specific image before the others."""
    usable = [image for image in images if image.runs_on(cc)]
    if not usable:
        return None
    return max(usable, key=lambda i: (i.kind == "cubin", i.arch, i.variant == "a", i.variant == "f"))


# ------------------------------------------------------------------------------------------
# ELF


@dataclass(frozen=True)
class _Section:
    name: str
    type: int
    offset: int
    size: int
    link: int
    info: int


def _sections(elf: bytes) -> list[_Section]:
    if elf[:4] != b"\x7fELF" or elf[4] != 2 or elf[5] != 1:
        raise ResourceError("not a 64-bit little-endian ELF file")
    shoff = struct.unpack_from("<Q", elf, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", elf, 0x3A)
    raw = [struct.unpack_from("<IIQQQQIIQQ", elf, shoff + i * shentsize) for i in range(shnum)]
    names_at = raw[shstrndx][4]

    def name(offset: int) -> str:
        start = names_at + offset
        return elf[start : elf.index(b"\0", start)].decode()

    return [_Section(name(h[0]), h[1], h[4], h[5], h[6], h[7]) for h in raw]


def _symbol_names(elf: bytes, sections: list[_Section]) -> list[str]:
    symtab = next((s for s in sections if s.type == 2), None)  # SHT_SYMTAB
    if symtab is None:
        return []
    strtab = sections[symtab.link].offset
    names = []
    for i in range(symtab.size // 24):
        st_name = struct.unpack_from("<I", elf, symtab.offset + i * 24)[0]
        start = strtab + st_name
        names.append(elf[start : elf.index(b"\0", start)].decode())
    return names


def _attributes(data: bytes) -> Iterator[tuple[int, bytes]]:
    """The (attribute, value) records of an ``.nv.info`` section."""
    at = 0
    while at + 4 <= len(data):
        fmt, attr = data[at], data[at + 1]
        if fmt == EIFMT_SVAL:
            size = struct.unpack_from("<H", data, at + 2)[0]
            yield attr, data[at + 4 : at + 4 + size]
            at += 4 + size
        elif fmt in (EIFMT_HVAL, EIFMT_BVAL, EIFMT_NVAL):
            yield attr, data[at + 2 : at + 4]
            at += 4
        else:
            raise ResourceError(f".nv.info: unknown attribute format {fmt:#x} at offset {at}")


def _words(value: bytes) -> tuple[int, ...]:
    return struct.unpack(f"<{len(value) // 4}I", value[: len(value) // 4 * 4])


def cubin_kernels(elf: bytes, arch: int) -> dict[str, KernelResources]:
    """Resources of every kernel in one cubin compiled for ``sm_<arch>``."""
    sections = _sections(elf)
    by_name = {s.name: s for s in sections}
    symbols = _symbol_names(elf, sections)
    registers: dict[str, int] = {}
    frames: dict[str, int] = {}
    if (info := by_name.get(".nv.info")) is not None:
        for attr, value in _attributes(elf[info.offset : info.offset + info.size]):
            if attr in (EIATTR_REGCOUNT, EIATTR_FRAME_SIZE):
                symbol, amount = _words(value)[:2]
                (registers if attr == EIATTR_REGCOUNT else frames)[symbols[symbol]] = amount
    reserved = RESERVED_SMEM_IN_SECTION if arch >= 90 else 0
    kernels = {}
    for section in sections:
        if not section.name.startswith(".nv.info."):
            continue
        name = section.name[len(".nv.info.") :]
        max_threads, cluster = 0, None
        for attr, value in _attributes(elf[section.offset : section.offset + section.size]):
            if attr == EIATTR_MAX_THREADS:
                x, y, z = _words(value)[:3]
                max_threads = x * y * z
            elif attr == EIATTR_CTA_PER_CLUSTER:
                cx, cy, cz = _words(value)[:3]
                cluster = (cx, cy, cz)
        shared = by_name.get(f".nv.shared.{name}")
        constant = by_name.get(f".nv.constant0.{name}")
        kernels[name] = KernelResources(
            name=name,
            registers=registers.get(name, 0),
            static_smem=max(0, (shared.size if shared else 0) - reserved),
            max_threads=max_threads,
            local_bytes=frames.get(name, 0),
            const_bytes=constant.size if constant else 0,
            cluster=cluster,
        )
    return kernels


def _fatbin_section(host_elf: bytes, path: Path) -> bytes:
    for section in _sections(host_elf):
        if section.name == ".nv_fatbin":
            return host_elf[section.offset : section.offset + section.size]
    raise ResourceError(f"{path} has no .nv_fatbin section (no device code)")


def read_images(path: Path) -> list[Image]:
    """Every image embedded in a host object or executable built by nvcc."""
    data = path.read_bytes()
    try:
        fatbin = _fatbin_section(data, path)
    except (struct.error, IndexError, ValueError) as exc:
        raise ResourceError(f"{path}: malformed ELF ({exc})") from None
    images = []
    at = container = 0
    while at + 16 <= len(fatbin):
        magic, _version, header_size, size = struct.unpack_from("<IHHQ", fatbin, at)
        if magic != FATBIN_MAGIC:  # containers of several translation units are 8-byte aligned
            at += 8
            continue
        entry = at + header_size
        while entry < at + header_size + size:
            kind, _ver, entry_header, payload_size = struct.unpack_from("<HHIQ", fatbin, entry)
            words = struct.unpack_from(f"<{entry_header // 4}I", fatbin, entry)
            payload = fatbin[entry + entry_header : entry + entry_header + payload_size]
            arch, flags = words[7], words[10]
            variant: Variant = (
                "a" if flags & FLAG_ARCH_SPECIFIC else "f" if flags & FLAG_FAMILY_SPECIFIC else ""
            )
            if kind == ENTRY_ELF:
                if payload[:4] != b"\x7fELF":
                    raise ResourceError(
                        f"{path}: the sm_{arch}{variant} image is compressed; build with "
                        f"nvcc --no-compress so its resources can be read"
                    )
                images.append(Image("cubin", arch, variant, cubin_kernels(payload, arch), container))
            elif kind == ENTRY_PTX:
                images.append(Image("ptx", arch, variant, container=container))
            entry += entry_header + payload_size
        at += header_size + size
        container += 1
    if not images:
        raise ResourceError(f"{path}: .nv_fatbin holds no image")
    return images


def kernel_table(images: list[Image], cc: int) -> str:
    """The text of the file TILECONFORM_VIRTUAL_KERNELS names, for a device of capability
    ``cc``: the image the driver would load from each fat binary of the program (a unit's
    kernels and its harness are two) and the resources of their kernels."""
    chosen = [
        select_image([i for i in images if i.container == c], cc) for c in {i.container for i in images}
    ]
    if not chosen or any(image is None for image in chosen):
        return "image none\n"
    loaded = [image for image in chosen if image is not None]
    if ptx := [image for image in loaded if image.kind == "ptx"]:  # JIT-compiled on the device
        return f"image ptx {ptx[0].label}\n"
    lines = [f"image {loaded[0].label}", *(k.table_line() for i in loaded for k in i.kernels.values())]
    return "\n".join(lines) + "\n"
