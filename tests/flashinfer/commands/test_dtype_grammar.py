"""One spelling of a dtype combination everywhere (:func:`pytest_tileconform.dtypes.parse_dtypes`):
a matrix's ``dtype:`` string, ``bisect``, ``tactics``, ``gen-matrix`` and ``export-blocklist``
read the same words as the same combination, and refuse the same mistakes with the same message."""

from __future__ import annotations

import pytest
from helpers.cli_corpus import VALID_RESULTS
from helpers.fake_backend import TileRun, output
from helpers.paths import DATA

from pytest_tileconform.commands.cli import main
from pytest_tileconform.dtypes import DTYPES_GRAMMAR, parse_dtypes
from pytest_tileconform.flashinfer.commands.bisect import BisectError, _dtypes
from pytest_tileconform.flashinfer.commands.genmatrix import GenMatrixError, select_dtypes
from pytest_tileconform.flashinfer.commands.tactics import select_runners
from pytest_tileconform.flashinfer.configs import KernelConfig
from pytest_tileconform.flashinfer.tactics.offered import parse

TACTICS = parse((DATA / "tactics-sm120-flashinfer-0.7.4.jsonl").read_text().splitlines())
#: every spelling of NVFP4 x NVFP4 -> bf16
NVFP4_BF16 = ["nvfp4-bf16", "NVFP4-BF16", " nvfp4xnvfp4-bf16 ", "nvfp4:nvfp4:bf16", "NvFp4:nvfp4:BF16"]
#: every spelling of fp8 x int4 -> bf16
W4A8 = ["fp8_e4m3xint4-bf16", "fp8xint4-bf16", "e4m3xint4-bf16", "fp8:int4:bf16", "e4m3:INT4:bf16"]
CONFIGS = [
    KernelConfig(120, "nvfp4", "nvfp4", out, (128, 128, 128), (1, 1, 1), False, "none")
    for out in ("bf16", "fp16")
]


@pytest.mark.parametrize("text", NVFP4_BF16)
def test_every_spelling_is_one_combination_in_every_command(text: str) -> None:
    assert parse_dtypes(text) == ("nvfp4", "nvfp4", "bf16")
    assert _dtypes(text) == ("nvfp4", "nvfp4", "bf16")  # bisect
    assert select_runners(TACTICS, text) == ["nvfp4-bf16"]  # tactics
    assert [c.out for c in select_dtypes(CONFIGS, [text])] == ["bf16"]  # gen-matrix


@pytest.mark.parametrize("text", W4A8)
def test_mixed_inputs_and_aliases(text: str) -> None:
    assert parse_dtypes(text) == ("fp8_e4m3", "int4", "bf16")


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("fp9-bf16", "unknown activation dtype 'fp9'"),
        ("nvfp4:bf16", "ACT:WEIGHT:OUT names three dtypes"),
        ("bf16-nvfp4", "unknown output dtype 'nvfp4'"),
        ("int4xint4-bf16", "unknown activation dtype 'int4'"),
        ("", "unknown"),
    ],
)
def test_one_refusal_everywhere(text: str, fragment: str) -> None:
    message = f"{text!r}: "
    with pytest.raises(ValueError) as parsed:
        parse_dtypes(text)
    assert str(parsed.value).startswith(message) and fragment in str(parsed.value)
    assert str(parsed.value).endswith(f"a combination is {DTYPES_GRAMMAR}")
    with pytest.raises(BisectError) as bisect:
        _dtypes(text)
    assert str(bisect.value) == f"--dtype {parsed.value}"
    with pytest.raises(GenMatrixError) as gen:
        select_dtypes(CONFIGS, [text])
    assert str(gen.value) == f"--dtype {parsed.value}"


def test_a_bare_activation_selects_every_output_in_selections() -> None:
    assert select_runners(TACTICS, "NVFP4") == ["nvfp4-bf16", "nvfp4-fp16"]
    assert len(select_dtypes(CONFIGS, ["nvfp4"])) == 2
    assert _dtypes("bf16") == ("bf16", "bf16", "bf16")  # one case: all three


def test_export_blocklist_reads_the_same_grammar(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["export-blocklist", "--arch", "sm120", str(VALID_RESULTS), "--accept-virtual", "--gpu", "X"]
    assert main([*argv, "--dtype", "fp9-bf16"]) == 2
    assert "--dtype 'fp9-bf16': unknown activation dtype 'fp9'" in capsys.readouterr().err


@pytest.mark.parametrize("text", ["nvfp4-bf16", "nvfp4:nvfp4:bf16", "NVFP4xNVFP4-BF16"])
def test_a_matrix_reads_the_same_grammar(tc: TileRun, text: str) -> None:
    tc.matrix(
        f"""\
        version: 1
        backend: fake
        suites:
          - arch: sm90
            dtype: "{text}"
            tile: 128x64x64
            problems: {{experts: 2, rows: 64, n: 256, k: 128}}
        """
    )
    assert tc.collect() == ["m.yaml::sm90-nvfp4-bf16-128x64x64-c1x1x1-none"]


def test_a_matrix_refuses_a_dtype_it_cannot_read_by_role(tc: TileRun) -> None:
    path = tc.matrix(
        """\
        version: 1
        backend: fake
        suites:
          - {arch: sm90, dtype: "nvfp4:bf16", tile: 128x64x64, problems: {experts: 2, rows: 8, n: 8, k: 8}}
        """
    )
    result = tc.run("--collect-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert f"{path}:4:18: suites.0.dtype.0: 'nvfp4:bf16': ACT:WEIGHT:OUT names three dtypes" in output(result)
