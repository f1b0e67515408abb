"""The element types of the matrix format: one registry that every other module reads.

Each type is described once, in every vocabulary the plugin speaks: its name in matrix files and
case ids, its storage (bits, and the torch dtype the input files hold it in), the C++ type and
preprocessor guard FlashInfer's ``generate_kernels.py`` instantiates it with, the name of its
element type in FlashInfer's ``cutlass_library.py``, and its block scaling. The sets of types a
role admits (activation, weight, output) and the labels case ids spell are derived from it.

Nothing here imports torch or pydantic: the matrix format, the code generator and the
reference all read this module.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

Role = Literal["activation", "weight", "output"]


@dataclass(frozen=True)
class DType:
    """One element type."""

    name: str  #: as matrix files and case ids spell it
    bits: int  #: storage bits per element
    storage: str  #: torch dtype of one stored element, by name ("uint8": two fp4 per byte)
    cuda_type: str  #: C++ type FlashInfer instantiates with (generate_kernels.py ``CudaTypeName``)
    guard: str  #: preprocessor condition generate_kernels.py puts around the instantiation
    library: str  #: element type in FlashInfer's cutlass_library.py (``DataType`` member, or e2m1)
    roles: tuple[Role, ...]  #: what a matrix may use it as
    #: elements along K sharing one scale factor (block-scaled and group-scaled types only)
    block_size: int | None = None
    scale_format: str | None = None  #: "e4m3" (NVFP4), "ue8m0" (MX formats) or "bf16" (int4 groups)

    @property
    def block_scaled(self) -> bool:
        return self.block_size is not None

    @property
    def mx(self) -> bool:
        """An OCP MX type (ue8m0 block scales): generate_kernels.py's ``is_mx_fpx``."""
        return self.scale_format == "ue8m0"


_ALL: tuple[Role, ...] = ("activation", "weight", "output")
_IN: tuple[Role, ...] = ("activation", "weight")
_W: tuple[Role, ...] = ("weight",)

#: Every type, in the order messages list them: (name, bits, storage, cuda_type, guard, library,
#: roles[, block_size, scale_format]).
# fmt: off
DTYPES: dict[str, DType] = {t.name: t for t in (
    DType("bf16",     16, "bfloat16",      "__nv_bfloat16", "defined(ENABLE_BF16)", "bf16", _ALL),
    DType("fp16",     16, "float16",       "half",          "1",                    "f16",  _ALL),
    DType("fp32",     32, "float32",       "float",         "1",                    "f32",  _ALL),
    DType("fp8_e4m3",  8, "float8_e4m3fn", "__nv_fp8_e4m3", "defined(ENABLE_FP8)",  "e4m3", _IN),
    DType("nvfp4",     4, "uint8",         "SafeFP4",       "defined(ENABLE_FP4)",  "e2m1", _IN, 16, "e4m3"),
    DType("mxfp4",     4, "uint8",         "SafeFP4",       "defined(ENABLE_FP4)",  "e2m1", _W,  32, "ue8m0"),
    DType("mxfp8",     8, "float8_e4m3fn", "__nv_fp8_e4m3", "defined(ENABLE_FP8)",  "e4m3", _IN, 32, "ue8m0"),
    # SM90's W4A8 weights: two's-complement int4 (the launcher reads cutlass::uint4b_t as
    # int4b_t) with a bf16 scale per 128 along K, whatever the output type
    DType("int4",      4, "uint8",         "cutlass::uint4b_t", "1",                "u4",   _W,  128, "bf16"),
    # SM90 fpA_intB's W8A16 weights (TensorRT-LLM's uint8_t, biased by 128 and reordered as its
    # preprocessing leaves them: flashinfer_dense/weight_only.py); their scales, per channel or
    # per group, are the activation's type and a case's choice
    DType("int8",      8, "uint8",         "uint8_t",           "1",                "u8",   _W),
)}
# fmt: on


def names(role: Role | None = None) -> tuple[str, ...]:
    """The types a role admits (every type without one), in registry order."""
    return tuple(name for name, t in DTYPES.items() if role is None or role in t.roles)


ACTIVATION_DTYPES = names("activation")
WEIGHT_DTYPES = names("weight")
OUTPUT_DTYPES = names("output")
#: The types a matrix takes without block scales: one scale per tensor at most (weight-only types
#: come in pairs with an activation of another type).
UNSCALED_DTYPES = tuple(name for name, t in DTYPES.items() if not t.block_scaled and "activation" in t.roles)
#: The (act, weight) pairs of block-scaled types that go together: NVFP4 x NVFP4 (e4m3 scale
#: per 16), MXFP8 x MXFP4 and MXFP8 x MXFP8 (ue8m0 scales per 32 on both), TensorRT-LLM's FP4,
#: MX FP8 x FP4 and MX FP8 GEMMs.
BLOCK_SCALED_PAIRS: tuple[tuple[str, str], ...] = (
    ("nvfp4", "nvfp4"),
    ("mxfp8", "mxfp4"),
    ("mxfp8", "mxfp8"),
)
#: The (act, weight) pairs of SM90's mixed-input launcher (``moe_gemm_tma_ws_mixed_input_launcher``):
#: W4A8 (fp8 x int4, bf16 scales per 128), W4A16 MXFP4 (bf16 x mxfp4) and fp8 x MXFP4, whose
#: ue8m0 scales the kernel applies before the MMA (FlashInfer's Humming-style path).
MIXED_INPUT_PAIRS: tuple[tuple[str, str], ...] = (
    ("fp8_e4m3", "int4"),
    ("bf16", "mxfp4"),
    ("fp8_e4m3", "mxfp4"),
)
#: Other spellings matrix files may use.
ALIASES = {"fp8": "fp8_e4m3", "e4m3": "fp8_e4m3", "half": "fp16", "float": "fp32"}


def dtype(name: str, role: Role | None = None) -> DType:
    """The registry entry of ``name``; with ``role``, only a type that role admits."""
    if name not in names(role):
        raise _unknown(name, role)
    return DTYPES[name]


def canonical_name(value: object, role: Role) -> str:
    """The registry name of a type as a matrix file may write it (any case, or an alias)."""
    name = str(value).lower()
    name = ALIASES.get(name, name)
    if name not in names(role):
        raise _unknown(value, role)
    return name


#: The one way a dtype combination is spelled: in a matrix's ``dtype:`` string and by every
#: command's ``--dtype`` (bisect, tactics, gen-matrix, export-blocklist).
DTYPES_GRAMMAR = (
    "D (all three D), ACT-OUT or ACTxWEIGHT-OUT as case ids spell them (fp8_e4m3-bf16, "
    "mxfp8xmxfp4-bf16), or ACT:WEIGHT:OUT; any case, fp8/e4m3 for fp8_e4m3"
)


def parse_dtypes(text: str) -> tuple[str, str, str]:
    """(act, weight, out) of a dtype combination spelled as :data:`DTYPES_GRAMMAR` says;
    ValueError says what is wrong and how to spell it."""
    raw = text.strip().lower()
    if ":" in raw:
        parts = raw.split(":")
        if len(parts) != 3:
            raise ValueError(
                f"{text!r}: ACT:WEIGHT:OUT names three dtypes; a combination is {DTYPES_GRAMMAR}"
            )
        act, weight, out = parts
    else:
        inputs, dash, out = raw.rpartition("-")
        if not dash:
            inputs = out = raw
        act, weight = _inputs(inputs)
    try:
        return (
            canonical_name(act, "activation"),
            canonical_name(weight, "weight"),
            canonical_name(out, "output"),
        )
    except ValueError as exc:
        raise ValueError(f"{text!r}: {exc}; a combination is {DTYPES_GRAMMAR}") from None


def _inputs(text: str) -> tuple[str, str]:
    """``mxfp8xmxfp4`` -> (mxfp8, mxfp4); one name -> that name twice."""
    if ALIASES.get(text, text) in DTYPES:
        return text, text
    splits = [
        (text[:at], text[at + 1 :])
        for at, char in enumerate(text)
        if char == "x" and all(ALIASES.get(part, part) in DTYPES for part in (text[:at], text[at + 1 :]))
    ]
    return splits[0] if len(splits) == 1 else (text, text)


def select_combinations(
    text: str, combinations: Iterable[tuple[str, str, str]]
) -> list[tuple[str, str, str]]:
    """The ``combinations`` a command's ``--dtype`` selects: the one :func:`parse_dtypes` reads;
    a bare activation (no ``-`` or ``:``) whose all-three combination is not among them selects
    every one of that activation (``nvfp4``: every output type). ValueError as parse_dtypes'."""
    given = list(combinations)
    raw = text.strip().lower()
    bare = "-" not in raw and ":" not in raw and ALIASES.get(raw, raw) in names("activation")
    if bare:
        act = canonical_name(raw, "activation")
        if (act, act, act) not in given:
            return [c for c in given if c[0] == act]
    wanted = parse_dtypes(text)
    return [c for c in given if c == wanted]


def _unknown(value: object, role: Role | None) -> ValueError:
    what = f"{role} dtype" if role else "dtype"
    return ValueError(f"unknown {what} {value!r}; expected one of {', '.join(names(role))}")


def from_library(library: str, mx: bool = False) -> str | None:
    """The name of cutlass_library's element type ``library`` (its MX variant with ``mx``)."""
    return next((name for name, t in DTYPES.items() if t.library == library and t.mx == mx), None)


def dtype_label(act: str, weight: str, out: str) -> str:
    """The dtypes as case ids spell them: ``bf16``, ``fp8_e4m3-bf16``, ``mxfp8xmxfp4-bf16``."""
    if act == weight == out:
        return act
    if act == weight:
        return f"{act}-{out}"
    return f"{act}x{weight}-{out}"


def label_dtypes(label: str) -> tuple[str, str, str]:
    """Inverse of :func:`dtype_label`: ``mxfp8xmxfp4-bf16`` -> (mxfp8, mxfp4, bf16),
    ``fp8_e4m3-bf16`` -> (fp8_e4m3, fp8_e4m3, bf16). Names it does not know are kept as given."""
    inputs, _, out = label.rpartition("-")
    if not inputs:
        return label, label, label
    for act in ACTIVATION_DTYPES:
        for weight in DTYPES:  # with the types only tactic lists name (int4)
            if inputs == f"{act}x{weight}":
                return act, weight, out
    return inputs, inputs, out


def shape_label(shape: Iterable[int]) -> str:
    """``(128, 256, 64)`` -> ``128x256x64``."""
    return "x".join(str(v) for v in shape)


def tile_k_elements(k_bytes: int, act: str) -> int:
    """A CTA K given in bytes of the activation (TensorRT-LLM's tile enum names:
    ``CtaShape128x128x128B`` is 128x128x64 for bf16) in elements, as SHAPE_CASE in
    moe_gemm_template_dispatch_tma_ws.h computes it: ``K_bytes * 8 / sizeof_bits(act)``."""
    return k_bytes * 8 // dtype(act).bits
