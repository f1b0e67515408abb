"""Inputs and expected D shared by the cases of one problem.

The cases of one problem differ in tile, cluster, swap_ab or PDL, never in their inputs, and
making the inputs and the reference is most of a case's time beside the kernel at real sizes;
:class:`InputCache` makes them once per problem, dtypes, fusion, seed and device.
"""

from __future__ import annotations

import contextlib
from collections import OrderedDict
from dataclasses import dataclass, field

import torch

from ..axes import MoeCase
from .full import EXACT, FULL, check_generatable, expected_for, make_family_inputs
from .reference import GroupedInputs
from .shared_operands import SharedOperands
from .tolerance import Expected

#: What one worker's cache may hold in host memory: a few problems at decode and mid sizes, one at
#: prefill size.
DEFAULT_CACHE_BYTES = 8 << 30
#: The share of a GPU's memory one worker's cache may hold there: the rest is for the harness's
#: own D, workspace and the reference's temporaries.
GPU_CACHE_SHARE = 0.4


def cache_bytes(device: torch.device) -> int:
    """How much one worker's :class:`InputCache` may hold on ``device``."""
    if device.type != "cuda":
        return DEFAULT_CACHE_BYTES
    return int(torch.cuda.get_device_properties(device).total_memory * GPU_CACHE_SHARE)


@dataclass(frozen=True, eq=False)
class Prepared:
    """One problem's inputs and, once asked for, its expected D."""

    inputs: GroupedInputs
    case: MoeCase
    _expected: list[Expected]
    _shared: list[SharedOperands] = field(default_factory=list)

    def expected(self) -> Expected:
        if not self._expected:
            self._expected.append(expected_for(self.inputs, self.case))
        return self._expected[0]

    def shared(self) -> SharedOperands:
        """The inputs as the harness reads them in device memory, and the buffers D comes back
        in (:mod:`.shared_operands`; made once; raises SharingError off a CUDA device)."""
        if not self._shared:
            self._shared.append(SharedOperands.of(self.inputs))
        return self._shared[0]

    @property
    def nbytes(self) -> int:
        parts = [e.nbytes for e in self._expected] + [s.nbytes for s in self._shared]
        return self.inputs.nbytes + sum(parts)


class InputCache:
    """The inputs and expected D of the last few problems. Bounded by the bytes the entries
    hold: the least recently used entry goes first; the newest stays until the next problem
    comes, whatever its size (its cases are being judged)."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._entries: OrderedDict[tuple[object, ...], Prepared] = OrderedDict()

    @staticmethod
    def key(case: MoeCase, seed: int, device: torch.device, family: str = EXACT) -> tuple[object, ...]:
        """What the inputs and expected D depend on (everything else of a case does not)."""
        problem = case.axes.problem.model_dump_json()
        return (case.act, case.weight, case.out, case.axes.fusion, problem, int(seed), str(device), family)

    def get(
        self, case: MoeCase, seed: int, device: torch.device | str | None = None, family: str = EXACT
    ) -> Prepared:
        """``case``'s inputs of input family ``family`` (:mod:`.full`) and expected D for ``seed``
        on ``device``, made at most once."""
        where = torch.device(device if device is not None else "cpu")
        key = self.key(case, seed, where, family)
        if key in self._entries:
            self._entries.move_to_end(key)
            return self._entries[key]
        prepared = Prepared(make_family_inputs(case, seed, family, where), case, [])
        self._entries[key] = prepared
        self.trim()
        return prepared

    def trim(self) -> None:
        """Drop the least recently used entries until the rest fit, the newest aside."""
        while len(self._entries) > 1 and sum(p.nbytes for p in self._entries.values()) > self.max_bytes:
            self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)


class WorkerInputs:
    """One worker's inputs and expected D on each device: an :class:`InputCache` per device,
    made at its first case (sizing it for a GPU starts CUDA)."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self._caches: dict[str, InputCache] = {}

    @staticmethod
    def hardware_device() -> str:
        """Where a hardware case's inputs are made: on the GPU where this process's torch can
        reach it; else (a torch without CUDA on a GPU host) on the CPU, handed over as files."""
        return "cuda" if torch.cuda.is_available() else "cpu"

    def get(self, case: MoeCase, device: str, family: str = EXACT) -> Prepared:
        """``case``'s inputs and expected D on ``device``, made once for all the cases of its
        problem: on the GPU for a case judged there (the harness reads them in place, the check
        runs there), on the CPU for the virtual device (which reads files and never runs D)."""
        where = torch.device(device)
        if device not in self._caches:
            self._caches[device] = InputCache(cache_bytes(where))
        return self._caches[device].get(case, self.seed, where, family)

    def full(self, case: MoeCase, device: str) -> Prepared | str:
        """``case``'s full-mantissa inputs (:mod:`.full`), or why it has none."""
        try:
            check_generatable(case)
        except (NotImplementedError, ValueError) as exc:
            return f"not generated: {exc}"
        return self.get(case, device, FULL)

    def make_ready(self, case: MoeCase) -> None:
        """Make hardware case ``case``'s inputs, their device copies and expected D now: run
        beside the compile of a cold first verdict, this takes starting CUDA in this process,
        loading cuBLAS and the reference off the path after the compile. Whatever fails here
        fails again when the case is judged, and is reported there."""
        with contextlib.suppress(Exception):
            device = self.hardware_device()
            for prepared in (self.get(case, device), self.full(case, device)):
                if isinstance(prepared, Prepared):
                    prepared.expected()
                    if prepared.inputs.device.type == "cuda":
                        prepared.shared()
