"""A problem's inputs on the GPU, handed to the harness by CUDA IPC instead of through files.

At real MoE sizes the operands are gigabytes (DeepSeek-V3's GEMM 1 weights alone are 15 GB in
bf16): written to files and read back by the harness for every case, they would cost seconds a
case. So on a GPU host the worker makes a problem's inputs and expected D on the GPU once
(:mod:`.prepared`) and, for each case, writes ``operands.txt`` (harness/PROTOCOL.md): the IPC
handle of each operand's allocation. The runner maps them (``runner.cpp``), the harness reads
them in place and copies its D into buffers of this process (``d``, and ``d_graph`` /
``d_repeat`` for the run of a replaying stage that changed D most), which the check reads where
they are. Per case nothing of the problem's size crosses the PCIe bus or the file system.

Handles come from the CUDA driver (``cuIpcGetMemHandle`` of the allocation that holds the
tensor), not from torch's own sharing, whose reference counting expects a torch consumer and
would hold every shared block until one released it.
"""

from __future__ import annotations

import ctypes
import functools
from dataclasses import dataclass, field
from pathlib import Path

import torch

from ...dtypes import dtype
from .mixed import is_mixed, pre_mma
from .reference import GroupedInputs, d_storage, output_dtype
from .runfiles import clamp_limit_operand, d_scales, flat_block_scales, mixed_operands, output_bytes
from .tolerance import POISON_BYTE

#: what the runner reads (harness/PROTOCOL.md)
OPERANDS_FILE = "operands.txt"
#: the D a replaying stage saved (verdict.json's ``saved``) -> the buffer it is in here
SAVED_BUFFERS = {
    "d.bin": "d",
    "d.graph.bin": "d_graph",
    "d.repeat.bin": "d_repeat",
    "d.sequence.bin": "d_sequence",
}
_HANDLE_BYTES = 64


class SharingError(RuntimeError):
    """This process cannot hand its device memory to the runner (no driver entry point, or an
    allocation IPC cannot share, as with ``expandable_segments``)."""


@functools.cache
def _driver() -> ctypes.CDLL:
    try:
        return ctypes.CDLL("libcuda.so.1")
    except OSError as exc:
        raise SharingError(f"cannot load the CUDA driver: {exc}") from exc


def _check(result: int, call: str) -> None:
    if result != 0:
        raise SharingError(f"{call} failed with CUresult {result}")


def ipc_handle(t: torch.Tensor) -> tuple[str, int]:
    """The IPC handle (hex) of the allocation holding ``t`` and ``t``'s byte offset in it."""
    driver = _driver()
    pointer = ctypes.c_uint64(t.data_ptr())
    base, size = ctypes.c_uint64(), ctypes.c_size_t()
    _check(
        driver.cuMemGetAddressRange_v2(ctypes.byref(base), ctypes.byref(size), pointer),
        "cuMemGetAddressRange",
    )
    handle = (ctypes.c_char * _HANDLE_BYTES)()
    _check(driver.cuIpcGetMemHandle(handle, base), "cuIpcGetMemHandle")
    return bytes(handle).hex(), pointer.value - base.value


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


@dataclass(eq=False)
class SharedOperands:
    """One problem's operands as the harness reads them (the bytes of its files, on the GPU),
    their handles, and the output buffers the harness copies D into."""

    inputs: dict[str, torch.Tensor]
    outputs: dict[str, torch.Tensor]
    _lines: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, inputs: GroupedInputs) -> SharedOperands:
        """``inputs`` (on a CUDA device) in the harness's layouts, with output buffers for D."""
        if inputs.device.type != "cuda":
            raise SharingError(f"inputs on {inputs.device} are not in device memory")
        tensors: dict[str, torch.Tensor | None] = {
            "a": inputs.a,
            "b": inputs.b,
            "alpha": None if inputs.alpha is None else inputs.alpha.to(torch.float32),
            "bias": None if inputs.bias is None else inputs.bias.to(output_dtype(inputs.out)),
        }
        if inputs.fusion == "finalize":
            if inputs.router_scales is None or inputs.dest_row is None:
                raise ValueError("finalize inputs need router_scales and dest_row")
            tensors["router_scales"] = inputs.router_scales.to(torch.float32)
            tensors["dest_row"] = inputs.dest_row.to(torch.int32)
        if is_mixed(inputs.act, inputs.weight):
            tensors.update(mixed_operands(inputs))
            if pre_mma(inputs.act, inputs.weight):
                tensors["alpha"] = None  # in the token scales
        elif dtype(inputs.act).block_scaled or dtype(inputs.weight).block_scaled:
            a_sf, b_sf = flat_block_scales(inputs)
            tensors["a_sf"], tensors["b_sf"] = a_sf.to(inputs.device), b_sf.to(inputs.device)
        if inputs.fusion == "activation":
            tensors["clamp_limit"] = clamp_limit_operand(inputs).to(inputs.device)
        operands = {name: t.contiguous() for name, t in tensors.items() if t is not None}
        d_bytes = output_bytes(inputs)
        outputs = {
            name: torch.empty(d_bytes, dtype=torch.uint8, device=inputs.device)
            for name in SAVED_BUFFERS.values()
        }
        return cls(operands, outputs)

    @property
    def nbytes(self) -> int:
        """What the layouts' copies and the output buffers add to the inputs."""
        return sum(_nbytes(t) for t in self.outputs.values()) + sum(
            _nbytes(t) for name, t in self.inputs.items() if name not in ("a", "b")
        )

    def write(self, run_dir: Path, *, graph: bool, repeat: bool, sequence: bool = False) -> None:
        """operands.txt for one case: every input, ``d`` and the buffers its stages need. ``d``
        is filled with the poison first, so a harness that never copied D into it fails.

        Returns once this process's GPU work is done: the runner's context is ordered with none
        of this process's streams, so inputs still being made (or the poison still being
        written) would race the harness's reads and its copy of D."""
        wanted = ["d", *(["d_graph"] if graph else []), *(["d_repeat"] if repeat else [])]
        wanted += ["d_sequence"] if sequence else []
        self.outputs["d"].fill_(POISON_BYTE)
        torch.cuda.synchronize(self.outputs["d"].device)
        lines = [self._line(name, t) for name, t in self.inputs.items()]
        lines += [self._line(name, self.outputs[name]) for name in wanted]
        (run_dir / OPERANDS_FILE).write_text("\n".join(lines) + "\n")

    def _line(self, name: str, t: torch.Tensor) -> str:
        if name not in self._lines:
            handle, offset = ipc_handle(t)
            self._lines[name] = f"{name} {handle} {offset} {_nbytes(t)}"
        return self._lines[name]

    def output(self, saved: str, inputs: GroupedInputs) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The D the harness copied into the buffer for ``saved`` (``d.bin``, ``d.graph.bin``,
        ``d.repeat.bin``), as ``out_rows x N`` of D's dtype, where it is, and an MXFP8 D's
        scales (:func:`.runfiles.d_scales`)."""
        raw = self.outputs[SAVED_BUFFERS[saved]]
        count = inputs.out_rows * inputs.n * torch.empty((), dtype=d_storage(inputs)).element_size()
        d = raw[:count].view(d_storage(inputs)).reshape(inputs.out_rows, inputs.n)
        return d, d_scales(raw, inputs)
