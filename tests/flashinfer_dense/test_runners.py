"""Which runner's names the dense reader finds in a ``gemm_base.py``: on a small written one, the
runner class by its ``get_valid_tactics``, the custom ops ``choose_one`` is called with (a literal,
a keyword, a variable and every literal it is given), and a module no runner tunes set apart
rather than failing the architecture's other runners. Against the installed FlashInfer the ids
themselves are tested in ``tests/flashinfer_dense/commands``."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_tileconform.flashinfer.sources import find_sources
from pytest_tileconform.flashinfer_dense.offered import DenseSourcesError, read_offered
from pytest_tileconform.flashinfer_dense.runners import GEMM_BASE, autotuner_names, runners

GEMM_BASE_TEXT = """
def get_fp4_module():
    def cutlass_fp4_gemm_runner():
        class CutlassFp4GemmRunner(TunableRunner):
            def get_valid_tactics(self, inputs, profile):
                return list(range(module.fp4_gemm_tactic_num()))
        return CutlassFp4GemmRunner()


def mm_fp4(a):
    runners = [get_fp4_module().cutlass_fp4_gemm_runner()]
    tuner.choose_one("fp4_gemm", runners, config, a)


def bmm_fp4(a):
    runner = get_fp4_module().cutlass_fp4_gemm_runner()
    tuner.choose_one(custom_op="fp4_bmm", runners=[runner])


def mm_fp4_pdl(a, pdl):
    custom_op = "fp4_gemm"
    if pdl is None:
        custom_op = "fp4_gemm_pdl_auto"
    tuner.choose_one(custom_op, [get_fp4_module().cutlass_fp4_gemm_runner()], config, a)


def unrelated(a):
    tuner.choose_one("other_gemm", [a])
"""


def _package(root: Path) -> Path:
    (root / GEMM_BASE).parent.mkdir(parents=True)
    (root / GEMM_BASE).write_text(GEMM_BASE_TEXT)
    return root


def test_the_runner_class_and_every_custom_op_it_is_tuned_under(tmp_path: Path) -> None:
    names = autotuner_names(_package(tmp_path))
    assert names == {"fp4": ("CutlassFp4GemmRunner", ("fp4_gemm", "fp4_bmm", "fp4_gemm_pdl_auto"))}


def test_a_module_no_runner_tunes_is_set_apart(tmp_path: Path) -> None:
    offered = read_offered(find_sources())
    tuned, untuned = runners(offered, "sm100", _package(tmp_path))
    assert [r.family.module for r in tuned] == ["fp4_gemm_cutlass"]
    assert tuned[0].blocklist_keys == (
        "fp4_gemm::CutlassFp4GemmRunner",
        "fp4_bmm::CutlassFp4GemmRunner",
        "fp4_gemm_pdl_auto::CutlassFp4GemmRunner",
    )
    assert sorted(f.module for f in untuned) == [
        "bf16_gemm_cutlass",
        "fp8_gemm_cutlass",
        "mxfp8_gemm_cutlass",
    ]


def test_the_entry_points_must_be_there(tmp_path: Path) -> None:
    with pytest.raises(DenseSourcesError, match=r"gemm_base\.py are missing"):
        autotuner_names(tmp_path)
