"""FlashInfer's kernel generator (``flashinfer/jit/gemm/cutlass/generate_kernels.py``), loaded on
its own, and the MoE grouped-GEMM configurations it instantiates for an architecture.

The generator is a plain module with one sibling (``cutlass_library.py``); it is loaded as a
private package from its file, so the ``flashinfer`` package (slow, loads CUDA libraries) is
never imported. Only operations that use the TMA warp-specialized MoE launcher
(``moe_gemm_tma_ws_launcher.inl``) count; each is converted to a :class:`KernelConfig` and kept
only if :func:`.codegen.instantiation` reproduces FlashInfer's own instantiation of it byte for
byte. The others are returned with the reason they were left out.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path
from types import CodeType, ModuleType
from typing import Any

from ..archs import KNOWN, arch_name, arch_number
from ..dtypes import DTYPES, dtype_label, from_library
from .codegen import instantiation
from .configs import KERNEL_ARCHES, KernelConfig, UnsupportedConfig
from .sources import FlashInferSources

_PACKAGE = "_tileconform_flashinfer_cutlass_gen"

#: the arch whose operations an arch's devices run (SM121 builds FlashInfer's SM120 kernel set)
GENERATOR_ARCH = {arch: {"sm121": 120}.get(arch, arch_number(arch)) for arch in KNOWN}


class GeneratorError(RuntimeError):
    """The generator could not be found, loaded or asked."""


class _SourceOnly(importlib.machinery.SourceFileLoader):
    """Runs a generator file from its source alone: no ``__pycache__`` beside it is read or
    written. A release entry holds its listed files and nothing else (:mod:`.releases`): one file
    more and the next run refuses the entry and unpacks it again, from a wheel an air-gapped
    runner does not have."""

    def get_code(self, fullname: str) -> CodeType:
        path = self.get_filename(fullname)
        return self.source_to_code(self.get_data(path), path)


def load_generator(sources: FlashInferSources) -> ModuleType:
    """``generate_kernels.py`` of ``sources``, loaded as a private package (cached per file)."""
    script = sources.generate_kernels_py
    if script is None:
        raise GeneratorError(
            f"FlashInfer sources at {sources.root} come without jit/gemm/cutlass/generate_kernels.py "
            "(only an installed flashinfer-python package has it)"
        )
    package = f"{_PACKAGE}_{abs(hash(str(script.parent)))}"
    name = f"{package}.generate_kernels"
    if name in sys.modules:
        return sys.modules[name]
    try:
        path = str(script.parent / "__init__.py")
        init = importlib.util.spec_from_file_location(
            package, path, loader=_SourceOnly(package, path), submodule_search_locations=[str(script.parent)]
        )
        if init is None or init.loader is None:
            raise GeneratorError(f"cannot load {script.parent / '__init__.py'}")
        sys.modules[package] = importlib.util.module_from_spec(init)
        init.loader.exec_module(sys.modules[package])
        module: ModuleType | None = None
        for part in ("cutlass_library", "generate_kernels"):
            name, path = f"{package}.{part}", str(script.parent / f"{part}.py")
            spec = importlib.util.spec_from_file_location(name, path, loader=_SourceOnly(name, path))
            if spec is None or spec.loader is None:
                raise GeneratorError(f"cannot load {script.parent / (part + '.py')}")
            module = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = module
            spec.loader.exec_module(module)
    except GeneratorError:
        raise
    except Exception as exc:  # whatever the generator's own code raises while loading
        raise GeneratorError(f"loading {script} failed: {type(exc).__name__}: {exc}") from exc
    assert module is not None
    return module


@dataclass(frozen=True)
class Skipped:
    """A generator operation for the MoE launcher that this harness does not build."""

    description: str
    reason: str


def _operations(generator: ModuleType, arch: int) -> list[Any]:
    """Every MoE grouped-GEMM operation FlashInfer's module for ``arch`` instantiates, in its
    generator's order: SM90's uniform and mixed-input ones, SM100's, SM103's own followed by the
    SM100 ones its module compiles too (``generate_gemm_operations``), SM120's."""
    if arch == 90:
        return [
            *generator.generate_sm90_grouped_gemm_operations(True),
            *generator.generate_sm90_mixed_type_grouped_gemm_operations(True),
        ]
    if arch == 100:
        return list(generator.generate_sm100_grouped_gemm_operations(True, 100))
    if arch == 103:
        return [
            *generator.generate_sm100_grouped_gemm_operations(True, 103),
            *generator.generate_sm100_grouped_gemm_operations(True, 100),
        ]
    if arch == 120:
        return list(generator.generate_sm120_grouped_gemm_operations(True))
    raise GeneratorError(f"FlashInfer's generator has no MoE grouped GEMM for {arch_name(arch)}")


def _dtype_names(generator: ModuleType, op: Any) -> tuple[str, str, str]:
    """The registry names of an operation's act, weight and output types. The generator names
    fp4 with an ``e2m1_type`` object, the others with ``DataType`` members; ``is_mx_fpx`` marks
    its fp4 and its fp8 inputs as MX, and SM90's mixed-input fp4 weights (ue8m0 group scales)
    are MXFP4."""
    plain = {
        getattr(generator.DataType, t.library): t
        for t in DTYPES.values()
        if not t.mx and t.library != "e2m1" and hasattr(generator.DataType, t.library)
    }
    ue8m0_scales = getattr(op, "scalezero_type", None) == getattr(generator.DataType, "ue8m0", object())

    def name(value: Any, role: str) -> str:
        found = None
        if isinstance(value, generator.e2m1_type):
            found = from_library("e2m1", op.is_mx_fpx or ue8m0_scales)
        elif value in plain:
            base = plain[value]
            mx = from_library(base.library, mx=True) if op.is_mx_fpx and role != "out" else None
            found = mx or base.name
        if found is None:
            raise UnsupportedConfig(f"{role} type {value} has no name in the matrix format")
        return found

    return name(op.act_type, "act"), name(op.weight_type, "weight"), name(op.output_type, "out")


def _type_name(value: Any) -> str:
    return "e2m1" if type(value).__name__ == "e2m1_type" else str(getattr(value, "name", value))


def _describe(op: Any) -> str:
    types = f"{_type_name(op.act_type)}x{_type_name(op.weight_type)}->{_type_name(op.output_type)}"
    return (
        f"{arch_name(op.arch)} {types} cta {list(op.cta_shape)} "
        f"cga {list(op.cga_shape)} fusion {getattr(op.epi_fusion, 'name', op.epi_fusion)} "
        f"epi {getattr(op.epi_schedule, 'name', op.epi_schedule)} mx {op.is_mx_fpx} "
        f"dynamic_cga {op.dynamic_cga} swap_ab {op.swap_ab}"
    )


def _schedule_name(op: Any) -> str | None:
    return getattr(op.epi_schedule, "name", None) if op.epi_schedule is not None else None


def _is_mixed(op: Any) -> bool:
    return bool(op.arch == 90 and op.act_type != op.weight_type)


def mixed_mainloop(op: Any) -> str:
    """An SM90 mixed-input operation's mainloop as the matrix and the tactics name it
    (``MainloopScheduleType``): its single-warpgroup kernel type, else Pingpong or Cooperative."""
    kind = str(getattr(op, "sm90_mixed_input_kernel_type", "warp_specialized"))
    if kind != "warp_specialized":
        return kind
    return (
        "pingpong"
        if "Pingpong" in str(getattr(op.mainloop_schedule, "name", op.mainloop_schedule))
        else "cooperative"
    )


def to_config(generator: ModuleType, op: Any, arch: int) -> KernelConfig:
    """The KernelConfig of one generator operation; UnsupportedConfig if codegen cannot build
    exactly FlashInfer's instantiation of it. SM90's mixed-input kernels are the swapped product
    (the launcher's only form) without fusion, told apart by their mainloop."""
    mixed = _is_mixed(op)
    own = GENERATOR_ARCH.get(arch_name(arch), arch)
    if not mixed and op.arch != own and op.arch not in KERNEL_ARCHES.get(arch, ()):
        raise UnsupportedConfig(f"an Sm{op.arch} kernel in FlashInfer's {arch_name(arch)} module")
    fusions = {
        None: "none",
        generator.TrtLlm_EpilogueFusion.epilogue_fusion_none: "none",
        generator.TrtLlm_EpilogueFusion.epilogue_fusion_finalize: "finalize",
        generator.TrtLlm_EpilogueFusion.epilogue_fusion_activation: "activation",
    }
    if op.epi_fusion not in fusions:
        raise UnsupportedConfig(f"epilogue fusion {op.epi_fusion} is not built by the harness")
    act, weight, out = _dtype_names(generator, op)
    config = KernelConfig(
        arch=arch,
        act=act,
        weight=weight,
        out=out,
        tile=tuple(int(v) for v in op.cta_shape),  # type: ignore[arg-type]
        cluster=tuple(int(v) for v in op.cga_shape),  # type: ignore[arg-type]
        swap_ab=mixed or bool(op.swap_ab),
        fusion=fusions[op.epi_fusion],
        epilogue="" if mixed else schedule_variant(_schedule_name(op), False),
        dynamic_cga=bool(op.dynamic_cga),
        mainloop=mixed_mainloop(op) if mixed else "",
        kernel_arch=0 if mixed or op.arch == own else int(op.arch),
    )
    ours = instantiation(config)  # raises UnsupportedConfig with codegen's reason
    if ours != generator.instantiate_operation(op):
        raise UnsupportedConfig("the harness's instantiation differs from FlashInfer's")
    return config


def instantiated_configs(sources: FlashInferSources, arch: str) -> tuple[list[KernelConfig], list[Skipped]]:
    """The configurations FlashInfer's generator instantiates for ``arch`` (e.g. ``sm120``) with
    the MoE TMA WS launcher, in the generator's order, and those the harness cannot build."""
    if arch not in GENERATOR_ARCH:
        known = ", ".join(GENERATOR_ARCH)
        raise GeneratorError(f"arch {arch!r}: FlashInfer generates MoE grouped GEMMs for {known}")
    generator = load_generator(sources)
    number = arch_number(arch)
    configs: list[KernelConfig] = []
    skipped: list[Skipped] = []
    try:
        ops = _operations(generator, GENERATOR_ARCH[arch])
    except GeneratorError:
        raise
    except Exception as exc:
        raise GeneratorError(
            f"FlashInfer's generator failed for {arch}: {type(exc).__name__}: {exc}"
        ) from exc
    for op in ops:
        try:
            config = to_config(generator, op, number)
        except UnsupportedConfig as exc:
            skipped.append(Skipped(_describe(op), str(exc)))
            continue
        if config not in configs:
            configs.append(config)
    return configs, skipped


def generator_path(sources: FlashInferSources) -> Path | None:
    return sources.generate_kernels_py


@dataclass(frozen=True)
class GeneratedOp:
    """A generator operation for the MoE TMA WS launcher, whether or not the harness builds it."""

    dtypes: str  # dtype label as case ids spell it (nvfp4-bf16, fp8_e4m3-fp16, ...)
    tile: tuple[int, int, int]  # CTA tile, K in elements
    cluster: tuple[int, int, int]
    swap_ab: bool
    fusion: str  # none | finalize | activation | ...
    #: "" (SM90/SM120: schedule fixed by the launcher); SM100: tma | nosmem, +dynamic; SM90 mixed
    #: input: the mainloop (pingpong, cooperative, single_warpgroup_prefill/_rolling)
    variant: str


def kernel_arch_variant(kernel_arch: int) -> str:
    """What sets another arch's kernel apart in a configuration's variant (``+sm100kernel``: an
    SM100 kernel of FlashInfer's sm103 module, beside SM103's own of the same shape)."""
    return f"+{arch_name(kernel_arch)}kernel" if kernel_arch else ""


def schedule_variant(schedule: str | None, dynamic_cga: bool) -> str:
    """A short name for an SM100 epilogue schedule (+ dynamic cluster): "" when the launcher
    fixes it (generator ``None``, dispatch ``void``)."""
    if not schedule or schedule in ("void", "None"):
        return ""
    base = "nosmem" if "nosmem" in schedule.lower().replace("_", "") else "tma"
    return base + ("+dynamic" if dynamic_cga else "")


def is_dynamic(variant: str) -> bool:
    """Whether a variant (:func:`schedule_variant`, :func:`kernel_arch_variant`) is dynamic CGA."""
    return "dynamic" in variant.split("+")


def generated_ops(sources: FlashInferSources, arch: str) -> list[GeneratedOp]:
    """Every MoE grouped-GEMM operation FlashInfer's generator emits for ``arch`` (the uniform
    launcher's and SM90's mixed-input launcher's), named as tactics select them."""
    if arch not in GENERATOR_ARCH:
        raise GeneratorError(
            f"arch {arch!r}: FlashInfer generates MoE grouped GEMMs for {', '.join(GENERATOR_ARCH)}"
        )
    generator = load_generator(sources)
    try:
        ops = _operations(generator, GENERATOR_ARCH[arch])
    except Exception as exc:
        raise GeneratorError(
            f"FlashInfer's generator failed for {arch}: {type(exc).__name__}: {exc}"
        ) from exc
    found = []
    for op in ops:
        try:
            label = dtype_label(*_dtype_names(generator, op))
        except UnsupportedConfig:
            label = f"{_type_name(op.act_type)}x{_type_name(op.weight_type)}-{_type_name(op.output_type)}"
        mixed = _is_mixed(op)
        fusion = "none" if op.epi_fusion is None else str(getattr(op.epi_fusion, "name", op.epi_fusion))
        found.append(
            GeneratedOp(
                dtypes=label,
                tile=tuple(int(v) for v in op.cta_shape),  # type: ignore[arg-type]
                cluster=tuple(int(v) for v in op.cga_shape),  # type: ignore[arg-type]
                # the mixed-input launcher always computes the swapped product, the only form
                # FlashInfer's heuristic offers it in
                swap_ab=mixed or bool(op.swap_ab),
                fusion=fusion.removeprefix("epilogue_fusion_"),
                # an epilogue schedule is a variant on SM10x only (SM90's are the launcher's);
                # SM90's mixed-input kernels are told apart by their mainloop
                variant=(
                    mixed_mainloop(op)
                    if mixed
                    else schedule_variant(_schedule_name(op), bool(op.dynamic_cga))
                    + kernel_arch_variant(0 if op.arch == GENERATOR_ARCH[arch] else int(op.arch))
                    if op.arch >= 100
                    else ""
                ),
            )
        )
    return found
