"""The run directory's files (harness/PROTOCOL.md): problem.txt and the operand files a case's
inputs are written as, in the layouts TensorRT-LLM hands the kernel (block scales swizzled at
TensorRT-LLM's offsets, SM90 mixed-input scales folded as FlashInfer folds them), and D read back.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import torch

from ...dtypes import dtype
from . import mixed
from .activation import SCALE_BLOCK
from .blockscale import act_sf_offset, swizzle_block_scales, unswizzle_block_scales, weight_sf_offset
from .reference import GroupedInputs, d_storage, output_dtype


def problem_entries(inputs: GroupedInputs) -> dict[str, list[int]]:
    """problem.txt's keys and values; others (timing_iters, ...) may be added to the dict."""
    entries: dict[str, list[int]] = {
        "experts": [inputs.experts],
        "rows": list(inputs.rows_per_expert),
        "n": [inputs.n],
        "k": [inputs.k],
    }
    if inputs.fusion == "finalize":
        entries["out_rows"] = [inputs.out_rows]
    return entries


def format_problem(entries: Mapping[str, int | Sequence[int]]) -> str:
    """problem.txt's text: one ``key value...`` line per entry."""
    lines = []
    for key, value in entries.items():
        values = [value] if isinstance(value, int) else list(value)
        lines.append(" ".join([key, *(str(int(v)) for v in values)]))
    return "\n".join(lines) + "\n"


def _le_bytes(t: torch.Tensor) -> bytes:
    """A tensor's elements as little-endian bytes, on any host."""
    t = t.detach().to("cpu").contiguous()
    size = t.element_size()
    ints = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[size]
    arr = t.view(ints).numpy()
    return arr.astype(arr.dtype.newbyteorder("<"), copy=False).tobytes()


def _from_le_bytes(data: bytes, dtype: torch.dtype, shape: Sequence[int]) -> torch.Tensor:
    size = torch.empty((), dtype=dtype).element_size()
    np_ints = {1: np.uint8, 2: np.int16, 4: np.int32, 8: np.int64}[size]
    arr = np.frombuffer(data, dtype=np.dtype(np_ints).newbyteorder("<")).astype(np_ints)
    ints = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[size]
    return torch.from_numpy(arr.copy()).view(ints).view(dtype).reshape(tuple(shape))


def write_problem(
    inputs: GroupedInputs, run_dir: Path, *, extra_problem: Mapping[str, int | Sequence[int]] | None = None
) -> None:
    """problem.txt alone: the problem's entries and ``extra_problem``'s."""
    entries: dict[str, int | Sequence[int]] = dict(problem_entries(inputs))
    entries.update(extra_problem or {})
    (Path(run_dir) / "problem.txt").write_text(format_problem(entries))


def write_inputs(
    inputs: GroupedInputs,
    run_dir: Path,
    *,
    extra_problem: Mapping[str, int | Sequence[int]] | None = None,
) -> None:
    """Write problem.txt, a.bin, b.bin and, where they apply, alpha.bin, router_scales.bin,
    dest_row.bin, bias.bin (E x N of the output type), clamp_limit.bin, a_sf.bin and b_sf.bin
    into ``run_dir`` (which must exist).

    ``a_sf.bin`` is TensorRT-LLM's flat activation scale buffer: expert ``e``'s scales,
    swizzled (:func:`swizzle_block_scales`), at :func:`act_sf_offset`, zeros elsewhere;
    ``act_sf_offset(E, sum(rows))`` bytes. ``b_sf.bin`` holds every expert's swizzled weight
    scales at :func:`weight_sf_offset`, ``weight_sf_offset(E, N, K)`` bytes.
    """
    run_dir = Path(run_dir)
    write_problem(inputs, run_dir, extra_problem=extra_problem)
    (run_dir / "a.bin").write_bytes(_le_bytes(inputs.a))
    (run_dir / "b.bin").write_bytes(_le_bytes(inputs.b))
    if inputs.alpha is not None and not mixed.pre_mma(inputs.act, inputs.weight):
        (run_dir / "alpha.bin").write_bytes(_le_bytes(inputs.alpha.to(torch.float32)))
    if inputs.fusion == "finalize":
        if inputs.router_scales is None or inputs.dest_row is None:
            raise ValueError("finalize inputs need router_scales and dest_row")
        (run_dir / "router_scales.bin").write_bytes(_le_bytes(inputs.router_scales.to(torch.float32)))
        (run_dir / "dest_row.bin").write_bytes(_le_bytes(inputs.dest_row.to(torch.int32)))
    if inputs.bias is not None:
        (run_dir / "bias.bin").write_bytes(_le_bytes(inputs.bias.to(output_dtype(inputs.out))))
    if inputs.fusion == "activation":
        (run_dir / "clamp_limit.bin").write_bytes(_le_bytes(clamp_limit_operand(inputs)))
    if mixed.is_mixed(inputs.act, inputs.weight):
        for name, t in mixed_operands(inputs).items():
            (run_dir / f"{name}.bin").write_bytes(_le_bytes(t))
    elif dtype(inputs.act).block_scaled or dtype(inputs.weight).block_scaled:
        a_sf, b_sf = flat_block_scales(inputs)
        (run_dir / "a_sf.bin").write_bytes(_le_bytes(a_sf))
        (run_dir / "b_sf.bin").write_bytes(_le_bytes(b_sf))


def clamp_limit_operand(inputs: GroupedInputs) -> torch.Tensor:
    """``clamp_limit.bin``'s one float32: the activation fusion's ClampedRelu2 limit."""
    if inputs.clamp_limit is None:
        raise ValueError("activation inputs need clamp_limit")
    return torch.tensor([inputs.clamp_limit], dtype=torch.float32)


def mixed_operands(inputs: GroupedInputs) -> dict[str, torch.Tensor]:
    """An SM90 mixed-input case's ``b_scale`` (the folded group scales, or exponent offsets for
    fp8 x MXFP4) and its alpha: ``alpha`` per expert for W4A8, ``token_scales`` per row for
    fp8 x MXFP4 (alpha and the residual in one, :func:`.mixed.token_scales`), none for bf16 x
    MXFP4, whose kernel takes alpha 1. ``write_inputs`` writes ``alpha.bin`` itself."""
    if inputs.b_sf is None:
        raise ValueError("mixed-input inputs need their weight scales")
    folded, residual = mixed.kernel_scales(inputs.b_sf, inputs.act, inputs.weight)
    found = {"b_scale": folded}
    if residual is not None:
        found["token_scales"] = mixed.token_scales(residual, inputs.alpha, inputs.rows_per_expert)
    return found


def flat_block_scales(inputs: GroupedInputs) -> tuple[torch.Tensor, torch.Tensor]:
    """The bytes of ``a_sf.bin`` and ``b_sf.bin`` (see :func:`write_inputs`)."""
    block = dtype(inputs.weight).block_size
    if block is None or inputs.a_sf is None or inputs.b_sf is None:
        raise ValueError("block-scaled inputs need a_sf and b_sf")
    k, n, experts = inputs.k, inputs.n, inputs.experts
    a_flat = torch.zeros(act_sf_offset(experts, inputs.total_rows, k, block), dtype=torch.uint8)
    for e, rows in inputs.expert_slices():
        if rows.stop == rows.start:
            continue
        swizzled = swizzle_block_scales(inputs.a_sf[rows])
        start = act_sf_offset(e, rows.start, k, block)
        a_flat[start : start + swizzled.numel()] = swizzled
    b_flat = torch.zeros(weight_sf_offset(experts, n, k, block), dtype=torch.uint8)
    for e in range(experts):
        swizzled = swizzle_block_scales(inputs.b_sf[e])
        start = weight_sf_offset(e, n, k, block)
        b_flat[start : start + swizzled.numel()] = swizzled
    return a_flat, b_flat


class OutputFileError(ValueError):
    """d.bin is missing or does not have the size the problem implies."""


def _d_scale_cols(inputs: GroupedInputs) -> int | None:
    """Scales per row of an MXFP8 D (activation fusion), None for a D without scales."""
    block = dtype(inputs.d).block_size
    return None if block is None or inputs.fusion != "activation" else inputs.n // block


def output_bytes(inputs: GroupedInputs) -> int:
    """d.bin's size: ``out_rows x N`` of D's dtype and, for an MXFP8 D, its scales after it in
    TensorRT-LLM's flat activation-SF layout with K = N (harness/PROTOCOL.md)."""
    itemsize = torch.empty((), dtype=d_storage(inputs)).element_size()
    d = inputs.out_rows * inputs.n * itemsize
    cols = _d_scale_cols(inputs)
    return d if cols is None else d + act_sf_offset(inputs.experts, inputs.total_rows, inputs.n, SCALE_BLOCK)


def d_scales(raw: torch.Tensor, inputs: GroupedInputs) -> torch.Tensor | None:
    """An MXFP8 D's scales (``sum(rows) x N/32`` uint8, linear) from d.bin's bytes (uint8,
    where they are); None for a D without scales."""
    cols = _d_scale_cols(inputs)
    if cols is None:
        return None
    itemsize = torch.empty((), dtype=d_storage(inputs)).element_size()
    flat = raw[inputs.out_rows * inputs.n * itemsize :]
    scales = torch.empty(inputs.total_rows, cols, dtype=torch.uint8, device=raw.device)
    for e, rows in inputs.expert_slices():
        start = act_sf_offset(e, rows.start, inputs.n, SCALE_BLOCK)
        scales[rows] = unswizzle_block_scales(flat[start:], rows.stop - rows.start, cols)
    return scales


def _read_d_file(run_dir: Path, inputs: GroupedInputs) -> bytes:
    path = Path(run_dir) / "d.bin"
    expected = output_bytes(inputs)
    if not path.is_file():
        raise OutputFileError(f"{path} does not exist: the harness wrote no output")
    data = path.read_bytes()
    if len(data) != expected:
        raise OutputFileError(
            f"{path} has {len(data)} bytes, expected {expected} "
            f"({inputs.out_rows} rows x {inputs.n} cols of {inputs.d}"
            f"{' and its scales' if _d_scale_cols(inputs) else ''})"
        )
    return data


def read_output(run_dir: Path, inputs: GroupedInputs) -> torch.Tensor:
    """d.bin's D as an ``out_rows x N`` tensor of D's dtype (``out_rows`` = sum(rows) without
    finalize): its bits as the kernel left them, so unwritten elements are told apart."""
    data = _read_d_file(run_dir, inputs)
    itemsize = torch.empty((), dtype=d_storage(inputs)).element_size()
    count = inputs.out_rows * inputs.n * itemsize
    return _from_le_bytes(data[:count], d_storage(inputs), (inputs.out_rows, inputs.n))


def read_output_scales(run_dir: Path, inputs: GroupedInputs) -> torch.Tensor | None:
    """d.bin's scales of an MXFP8 D (:func:`d_scales`), None for a D without them."""
    if _d_scale_cols(inputs) is None:
        return None
    return d_scales(torch.frombuffer(bytearray(_read_d_file(run_dir, inputs)), dtype=torch.uint8), inputs)
