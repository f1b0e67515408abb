"""The matrix file format: axes, defaults, overrides, dtypes, problems, ids, and validation."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from helpers.fake_backend import BASIC, BASIC_IDS, TEST_KINDS, TileRun, matrix_errors, output
from helpers.paths import REPO

from pytest_tileconform.matrix.load import load_matrix

PROBLEM = "problems: {experts: 2, rows: 64, n: 256, k: 128}"
ALREADY = (
    "already gives it; a case id is arch-dtypes-tile-cCLUSTER[-dynCLUSTER]-fusion[-nosmem][-MAINLOOP]"
    "[-sm100kernel][-swapab][-pdl|-nopdl][-problem name], so remove one of the two or make them "
    "differ in one of these (e.g. give their problems different names)"
)


def test_defaults_apply_to_every_suite(tc: TileRun) -> None:
    tc.matrix(
        """\
        version: 1
        backend: fake
        defaults:
          arch: sm90
          dtype: bf16
          cluster: [1x1x1, 2x1x1]
          problems: {experts: 2, rows: 64, n: 256, k: 128}
        suites:
          - tile: 128x64x64
          - name: swapped
            swap_ab: true
            cluster: 1x2x1
            tile: 64x128x64
        """
    )
    assert tc.collect() == [
        "m.yaml::sm90-bf16-128x64x64-c1x1x1-none",
        "m.yaml::sm90-bf16-128x64x64-c2x1x1-none",
        "m.yaml::sm90-bf16-64x128x64-c1x2x1-none-swapab",
    ]


def test_cartesian_product_in_file_order(tc: TileRun) -> None:
    tc.matrix(
        """\
        version: 1
        backend: fake
        suites:
          - arch: [sm90, sm100]
            dtype: [bf16, fp16]
            tile: [128x64x64, 256x128x64]
            cluster: [1x1x1, 2x1x1]
            swap_ab: [false, true]
            fusion: [none, finalize]
            problems:
              - {name: small, experts: 4, rows: 16, n: 128, k: 128}
              - {name: large, experts: 4, rows: 4096, n: 128, k: 128}
        """
    )
    expected = [
        f"m.yaml::{arch}-{dt}-{tile}-c{cluster}-{fusion}{'-swapab' if swap else ''}-{problem}"
        for tile in ("128x64x64", "256x128x64")
        for arch, dt, cluster, swap, fusion, problem in itertools.product(
            ("sm90", "sm100"),
            ("bf16", "fp16"),
            ("1x1x1", "2x1x1"),
            (False, True),
            ("none", "finalize"),
            ("small", "large"),
        )
    ]
    assert len(expected) == 128
    assert tc.collect() == expected


def test_tile_entry_overrides_suite_axes(tc: TileRun) -> None:
    tc.matrix(
        """\
        version: 1
        backend: fake
        suites:
          - arch: sm90
            dtype: bf16
            cluster: 1x1x1
            problems: {experts: 2, rows: 64, n: 256, k: 128}
            tile:
              - 128x64x64
              - {shape: 256x128x64, cluster: [2x1x1]}
              - shape: 64x64x128
                arch: [sm100, sm120]
                dtype: fp16
                fusion: finalize
        """
    )
    assert tc.collect() == [
        "m.yaml::sm90-bf16-128x64x64-c1x1x1-none",
        "m.yaml::sm90-bf16-256x128x64-c2x1x1-none",
        "m.yaml::sm100-fp16-64x64x128-c1x1x1-finalize",
        "m.yaml::sm120-fp16-64x64x128-c1x1x1-finalize",
    ]


def test_shapes_as_lists_of_ints(tc: TileRun) -> None:
    tc.matrix(BASIC.replace("[128x64x64, 128x128x64, 256x128x64]", "[{shape: [128, 64, 64]}]"))
    assert tc.collect() == [f"m.yaml::{BASIC_IDS[0]}"]


def test_dtype_labels(tc: TileRun) -> None:
    tc.matrix(
        BASIC.replace(
            "dtype: bf16",
            "dtype: [bf16, {act: fp8_e4m3, weight: fp8_e4m3, out: bf16},"
            " {act: mxfp8, weight: mxfp4, out: bf16}, {act: fp16, weight: fp16, out: fp16}]",
        ).replace("[128x64x64, 128x128x64, 256x128x64]", "128x64x64")
    )
    assert tc.collect() == [
        "m.yaml::sm90-bf16-128x64x64-c1x1x1-none",
        "m.yaml::sm90-fp8_e4m3-bf16-128x64x64-c1x1x1-none",
        "m.yaml::sm90-mxfp8xmxfp4-bf16-128x64x64-c1x1x1-none",
        "m.yaml::sm90-fp16-128x64x64-c1x1x1-none",
    ]


def test_dtype_aliases(tc: TileRun) -> None:
    tc.matrix(
        BASIC.replace(
            "dtype: bf16",
            "dtype: [half, {act: fp8, weight: E4M3, out: bf16}, {act: bf16, weight: fp8, out: float}]",
        ).replace("[128x64x64, 128x128x64, 256x128x64]", "128x64x64")
    )
    assert tc.collect() == [
        "m.yaml::sm90-fp16-128x64x64-c1x1x1-none",
        "m.yaml::sm90-fp8_e4m3-bf16-128x64x64-c1x1x1-none",
        "m.yaml::sm90-bf16xfp8_e4m3-fp32-128x64x64-c1x1x1-none",
    ]


def test_case_coordinates_reach_the_backend(tc: TileRun) -> None:
    tc.matrix(
        BASIC.replace("dtype: bf16", "dtype: {act: fp8, weight: mxfp4, out: fp16}")
        .replace("[128x64x64, 128x128x64, 256x128x64]", "128x64x64")
        .replace(PROBLEM, "problems: {name: odd, rows: [0, 77, 0, 130], n: 384, k: 96}")
    )
    tc.run("--tile-report", "r.json").assert_outcomes(passed=1)
    [entry] = json.loads((tc.path / "r.json").read_text())["cases"]
    assert entry["id"] == "sm90-fp8_e4m3xmxfp4-fp16-128x64x64-c1x1x1-none-odd"
    assert entry["case"] == {
        "arch": "sm90",
        "act": "fp8_e4m3",
        "weight": "mxfp4",
        "out": "fp16",
        "tile": "128x64x64",
        "cluster": "1x1x1",
        "swap_ab": False,
        "fusion": "none",
        # a results file states what a matrix left out: the launcher's epilogue and a static
        # cluster, FlashInfer's PDL default, no bias, seed 0
        "epilogue": None,
        "dynamic_cluster": None,
        "mainloop": None,
        "kernel_arch": None,
        "pdl": None,
        "problem": {
            "name": "odd",
            "rows": [0, 77, 0, 130],
            "n": 384,
            "k": 96,
            "bias": False,
            "seed": 0,
            "tokens": None,
            "top_k": None,
        },
    }


def test_sm10x_epilogue_and_dynamic_cluster(tc: TileRun) -> None:
    """The SM10x axes multiply like the others, name their cases only where they are not the
    default, and reach the backend and the results file."""
    tc.matrix(
        BASIC.replace("arch: sm90", "arch: sm100")
        .replace("[128x64x64, 128x128x64, 256x128x64]", "128x64x64")
        .replace(
            "    dtype: bf16\n",
            "    dtype: bf16\n    epilogue: [tma, nosmem]\n    dynamic_cluster: [4x2x1]\n",
        )
    )
    result = tc.run("--tile-report", "r.json")
    cases = {c["id"]: c["case"] for c in json.loads((tc.path / "r.json").read_text())["cases"]}
    assert list(cases) == [
        "sm100-bf16-128x64x64-c1x1x1-dyn4x2x1-none",
        "sm100-bf16-128x64x64-c1x1x1-dyn4x2x1-none-nosmem",
    ], result.stdout.str()
    first, second = cases.values()
    assert (first["epilogue"], first["dynamic_cluster"], second["epilogue"]) == ("tma", "4x2x1", "nosmem")


def test_sm90_mixed_input_mainloop(tc: TileRun) -> None:
    """The mainloop axis multiplies like the others, names its cases and reaches the results file."""
    tc.matrix(
        BASIC.replace("[128x64x64, 128x128x64, 256x128x64]", "128x64x128").replace(
            "    dtype: bf16\n",
            "    dtype: {act: fp8_e4m3, weight: int4, out: bf16}\n    swap_ab: true\n"
            "    mainloop: [pingpong, cooperative]\n",
        )
    )
    tc.run("--tile-report", "r.json")
    cases = {c["id"]: c["case"] for c in json.loads((tc.path / "r.json").read_text())["cases"]}
    assert list(cases) == [
        "sm90-fp8_e4m3xint4-bf16-128x64x128-c1x1x1-none-pingpong-swapab",
        "sm90-fp8_e4m3xint4-bf16-128x64x128-c1x1x1-none-cooperative-swapab",
    ]
    assert [c["mainloop"] for c in cases.values()] == ["pingpong", "cooperative"]


def test_sm103_builds_sm100_kernels_through_kernel_arch(tc: TileRun) -> None:
    """``kernel_arch: sm100`` asks for the SM100 kernel FlashInfer's sm103 module compiles for
    sm_103a: a case of its own beside SM103's kernel of the same shape, named for it, and in the
    results file."""
    tc.matrix(
        BASIC.replace("arch: sm90", "arch: sm103")
        .replace(
            "[128x64x64, 128x128x64, 256x128x64]", "[{shape: 128x128x256, kernel_arch: [sm100]}, 128x128x256]"
        )
        .replace("    dtype: bf16\n", "    dtype: {act: nvfp4, weight: nvfp4, out: bf16}\n")
    )
    tc.run("--tile-report", "r.json")
    cases = {c["id"]: c["case"] for c in json.loads((tc.path / "r.json").read_text())["cases"]}
    assert list(cases) == [
        "sm103-nvfp4-bf16-128x128x256-c1x1x1-none-sm100kernel",
        "sm103-nvfp4-bf16-128x128x256-c1x1x1-none",
    ]
    assert [c["kernel_arch"] for c in cases.values()] == ["sm100", None]


def test_problem_rows_forms(tc: TileRun) -> None:
    tc.matrix(
        BASIC.replace("[128x64x64, 128x128x64, 256x128x64]", "128x64x64").replace(
            PROBLEM,
            """problems:
      - {name: empty, rows: [0, 0, 0], n: 64, k: 64}
      - {name: ragged, rows: [1, 127, 129, 0], n: 64, k: 64}
      - {name: uniform, experts: 3, rows: 200, n: 64, k: 64}
      - {name: listed, experts: 2, rows: [5, 6], n: 64, k: 64}
      - {name: noexperts, experts: 4, rows: 0, n: 64, k: 64}""",
        )
    )
    tc.run("--tile-report", "r.json").assert_outcomes(passed=5)
    cases = json.loads((tc.path / "r.json").read_text())["cases"]
    assert [(c["id"], c["case"]["problem"]["rows"]) for c in cases] == [
        ("sm90-bf16-128x64x64-c1x1x1-none-empty", [0, 0, 0]),
        ("sm90-bf16-128x64x64-c1x1x1-none-ragged", [1, 127, 129, 0]),
        ("sm90-bf16-128x64x64-c1x1x1-none-uniform", [200, 200, 200]),
        ("sm90-bf16-128x64x64-c1x1x1-none-listed", [5, 6]),
        ("sm90-bf16-128x64x64-c1x1x1-none-noexperts", [0, 0, 0, 0]),
    ]


def test_problem_name_and_swap_in_id(tc: TileRun) -> None:
    tc.matrix(
        BASIC.replace("[128x64x64, 128x128x64, 256x128x64]", "128x64x64")
        .replace(PROBLEM, "problems: {name: decode, experts: 2, rows: 1, n: 64, k: 64}")
        .replace("    dtype: bf16\n", "    dtype: bf16\n    swap_ab: [false, true]\n    fusion: finalize\n")
    )
    assert tc.collect() == [
        "m.yaml::sm90-bf16-128x64x64-c1x1x1-finalize-decode",
        "m.yaml::sm90-bf16-128x64x64-c1x1x1-finalize-swapab-decode",
    ]


# --- validation: every problem reported as file:line:col, exit code 4, no traceback ---------

INVALID = {
    "yaml-syntax": (
        BASIC.replace("    dtype: bf16\n", "    dtype: bf16: x\n"),
        ["5:16: invalid YAML: mapping values are not allowed here"],
    ),
    "yaml-duplicate-key": (
        BASIC + "backend: fake\n",
        [
            '8:1: invalid YAML: while constructing a mapping found duplicate key "backend" '
            'with value "fake" (original value: "fake")'
        ],
    ),
    "unknown-key": (
        BASIC.replace("    dtype: bf16\n", "    dtype: bf16\n    swap: true\n"),
        ["6:5: unknown key 'swap'"],
    ),
    "unknown-key-in-tile-entry": (
        BASIC.replace("128x128x64,", "{shape: 128x128x64, clusters: 2x1x1},"),
        ["6:43: unknown key 'clusters'"],
    ),
    "unknown-top-level-key": (
        "# a comment\n" + BASIC + "expectation: {}\n",
        ["9:1: unknown key 'expectation'"],
    ),
    "unknown-dtype-in-mapping": (
        BASIC.replace("dtype: bf16", "dtype: {act: bf16, weight: int2, out: bf16}"),
        [
            "5:24: suites.0.dtype.0.weight: unknown weight dtype 'int2'; expected one of "
            "bf16, fp16, fp32, fp8_e4m3, nvfp4, mxfp4, mxfp8, int4, int8"
        ],
    ),
    "unknown-output-dtype": (
        BASIC.replace("dtype: bf16", "dtype: [bf16, {act: bf16, weight: bf16, out: fp8}]"),
        ["5:45: suites.0.dtype.1.out: unknown output dtype 'fp8'; expected one of bf16, fp16, fp32"],
    ),
    "unknown-stage": (
        BASIC + "expectations:\n  sm90-bf16-128x64x64-c1x1x1-none: {stage: compiles}\n",
        [
            "9:37: expectations.sm90-bf16-128x64x64-c1x1x1-none.stage: Input should be "
            "'compile', 'prepare', 'can_implement', 'initialize', 'launch', 'run', 'numerics', "
            "'graph', 'repeat', 'sequence' or 'sanitize'"
        ],
    ),
    "pass-is-not-an-expectation-stage": (
        BASIC + "expectations:\n  sm90-bf16-128x64x64-c1x1x1-none:\n    stage: pass\n",
        [
            "10:5: expectations.sm90-bf16-128x64x64-c1x1x1-none.stage: Input should be "
            "'compile', 'prepare', 'can_implement', 'initialize', 'launch', 'run', 'numerics', "
            "'graph', 'repeat', 'sequence' or 'sanitize'"
        ],
    ),
    "tile-two-dims": (
        BASIC.replace("128x128x64,", "128x128,"),
        ["6:23: suites.0.tile.1.shape: shape '128x128' is not MxNxK with three positive integers"],
    ),
    "tile-zero-dim": (
        BASIC.replace("128x128x64,", "128x0x64,"),
        ["6:23: suites.0.tile.1.shape: shape '128x0x64' has a dimension that is not positive"],
    ),
    "tile-negative-dim": (
        BASIC.replace("128x128x64,", "{shape: 128x-1x64},"),
        ["6:24: suites.0.tile.1.shape: shape '128x-1x64' is not MxNxK with three positive integers"],
    ),
    "cluster-not-three-dims": (
        BASIC.replace("    dtype: bf16\n", "    dtype: bf16\n    cluster: [1x1x1, 2x1]\n"),
        ["6:22: suites.0.cluster.1: shape '2x1' is not MxNxK with three positive integers"],
    ),
    "duplicate-case": (
        BASIC.replace("256x128x64", "128x64x64"),
        [f"6:35: duplicate case 'sm90-bf16-128x64x64-c1x1x1-none': the tile entry at line 6 {ALREADY}"],
    ),
    "duplicate-case-across-suites": (
        BASIC + "  - {arch: sm90, dtype: bf16, tile: 256x128x64, " + PROBLEM + "}\n",
        [f"8:31: duplicate case 'sm90-bf16-256x128x64-c1x1x1-none': the tile entry at line 6 {ALREADY}"],
    ),
    "duplicate-cases-across-suites-said-once": (
        BASIC.replace("    dtype: bf16\n", "    dtype: bf16\n    fusion: [none, finalize]\n")
        + "  - {arch: sm90, dtype: bf16, tile: 256x128x64, fusion: [none, finalize], "
        + PROBLEM
        + "}\n",
        [
            "9:31: duplicate case 'sm90-bf16-256x128x64-c1x1x1-none' and 1 more: the tile entry at "
            "line 7 " + ALREADY
        ],
    ),
    "arch-listed-twice": (
        BASIC.replace("arch: sm90", "arch: [sm90, sm100, sm90]"),
        [
            "4:25: arch lists sm90 twice (items 1 and 3), so both give the same cases "
            "(e.g. 'sm90-bf16-128x64x64-c1x1x1-none'): list it once"
        ],
    ),
    "dtype-alias-listed-twice": (
        BASIC.replace(
            "dtype: bf16", "dtype: [{act: fp8, weight: fp8, out: bf16}, {act: e4m3, weight: e4m3, out: bf16}]"
        ),
        [
            "5:49: dtype lists fp8_e4m3-bf16 twice (items 1 and 2), so both give the same cases "
            "(e.g. 'sm90-fp8_e4m3-bf16-128x64x64-c1x1x1-none'): list it once"
        ],
    ),
    "problems-with-the-same-name": (
        BASIC.replace(
            PROBLEM,
            "problems: [{name: a, experts: 1, rows: 8, n: 8, k: 8}, "
            "{name: a, experts: 2, rows: 8, n: 8, k: 8}]",
        ),
        [
            "7:60: problems 1 and 2 of this list are both named 'a', so they give the same case ids "
            "(e.g. 'sm90-bf16-128x64x64-c1x1x1-none-a'): give each problem its own name"
        ],
    ),
    "empty-product": (
        BASIC.replace("    dtype: bf16\n", "    dtype: bf16\n    cluster: []\n"),
        [
            "7:12: empty product: cluster lists nothing",
            "7:23: empty product: cluster lists nothing",
            "7:35: empty product: cluster lists nothing",
        ],
    ),
    "missing-axes": (
        "version: 1\nbackend: fake\nsuites:\n  - tile: 128x64x64\n",
        ["4:5: no arch or dtype or problems given (in the tile entry, the suite or defaults)"],
    ),
    "unknown-backend": (
        BASIC.replace("backend: fake", "backend: cutlass"),
        ["2:1: unknown backend 'cutlass' (known: fake, flashinfer-cutlass-dense, flashinfer-cutlass-moe)"],
    ),
    "expectation-for-unknown-case": (
        BASIC + "expectations:\n  sm90-bf16-128x64x64-c1x1x1-none: {stage: run}\n"
        "  sm90-bf16-64x64x64-c1x1x1-none: {stage: compile}\n",
        [
            "10:3: expectation for 'sm90-bf16-64x64x64-c1x1x1-none', which is not a case of this matrix "
            "(--tile-update removes it)"
        ],
    ),
    "wrong-version": (
        BASIC.replace("version: 1", "version: 2"),
        ["1:1: unsupported matrix version 2; this plugin reads version 1"],
    ),
    "bad-arch": (
        BASIC.replace("arch: sm90", "arch: [sm90, hopper]"),
        ["4:18: suites.0.arch.1: arch 'hopper' is not of the form sm<major><minor> (e.g. sm90, sm120)"],
    ),
    "bad-fusion": (
        BASIC.replace("    dtype: bf16\n", "    dtype: bf16\n    fusion: [none, fused]\n"),
        ["6:20: suites.0.fusion.1: Input should be 'none', 'finalize' or 'activation'"],
    ),
    "bad-epilogue": (
        BASIC.replace("    dtype: bf16\n", "    dtype: bf16\n    epilogue: [tma, smem]\n"),
        ["6:21: suites.0.epilogue.1: Input should be 'tma' or 'nosmem'"],
    ),
    "bad-mainloop": (
        BASIC.replace("    dtype: bf16\n", "    dtype: bf16\n    mainloop: [pingpong, stream_k]\n"),
        [
            "6:26: suites.0.mainloop.1: Input should be 'pingpong', 'cooperative', "
            "'single_warpgroup_prefill' or 'single_warpgroup_rolling'"
        ],
    ),
    "bad-kernel-arch": (
        BASIC.replace("    dtype: bf16\n", "    dtype: bf16\n    kernel_arch: [sm100, sm90]\n"),
        ["6:26: suites.0.kernel_arch.1: Input should be 'sm100'"],
    ),
    "bad-dynamic-cluster": (
        BASIC.replace("    dtype: bf16\n", "    dtype: bf16\n    dynamic_cluster: [4x2x1, 0x1x1]\n"),
        ["6:30: suites.0.dynamic_cluster.1: shape '0x1x1' has a dimension that is not positive"],
    ),
    "epilogue-listed-twice": (
        BASIC.replace("arch: sm90", "arch: sm100").replace(
            "    dtype: bf16\n", "    dtype: bf16\n    epilogue: [nosmem, nosmem]\n"
        ),
        [
            "6:24: epilogue lists nosmem twice (items 1 and 2), so both give the same cases "
            "(e.g. 'sm100-bf16-128x64x64-c1x1x1-none-nosmem'): list it once"
        ],
    ),
    "rows-count-without-experts": (
        BASIC.replace(PROBLEM, "problems: [{rows: 64, n: 256, k: 128}]"),
        ["7:16: suites.0.problems.0: a single 'rows' count needs 'experts'"],
    ),
    "experts-disagree-with-rows": (
        BASIC.replace(PROBLEM, "problems: [{experts: 3, rows: [1, 2], n: 8, k: 8}]"),
        ["7:16: suites.0.problems.0: experts=3 but rows lists 2 experts"],
    ),
    "no-suites": (
        "version: 1\nbackend: fake\nsuites: []\n",
        ["3:1: suites: List should have at least 1 item after validation, not 0"],
    ),
    "not-a-mapping": ("- version: 1\n", ["1:1: a matrix must be a YAML mapping"]),
    "several-errors-sorted-by-position": (
        BASIC.replace("backend: fake", "backend: nope")
        .replace("arch: sm90", "arch: sm9")
        .replace("128x128x64,", "128x128x,"),
        [
            "2:1: unknown backend 'nope' (known: fake, flashinfer-cutlass-dense, flashinfer-cutlass-moe)",
            "4:5: suites.0.arch.0: arch 'sm9' is not of the form sm<major><minor> (e.g. sm90, sm120)",
            "6:23: suites.0.tile.1.shape: shape '128x128x' is not MxNxK with three positive integers",
        ],
    ),
}


@pytest.mark.parametrize("name", INVALID)
def test_invalid_matrix_is_a_usage_error_with_positions(tc: TileRun, name: str) -> None:
    text, expected = INVALID[name]
    path = tc.matrix(text)
    result = tc.run()
    assert matrix_errors(result, path) == expected
    result.stderr.fnmatch_lines(["ERROR: invalid tile matrix:"])
    assert "collected" not in result.stdout.str()


def test_unknown_dtype_is_reported_at_the_item(tc: TileRun) -> None:
    path = tc.matrix(BASIC.replace("dtype: bf16", "dtype: [bf16, bf17]"))
    errors = matrix_errors(tc.run(), path)
    assert errors
    assert {e.split(": ", 1)[0] for e in errors} == {"5:19"}
    assert (
        "5:19: suites.0.dtype.1.act: unknown activation dtype 'bf17'; expected one of "
        "bf16, fp16, fp32, fp8_e4m3, nvfp4, mxfp8"
    ) in errors


def test_errors_of_every_matrix_are_reported(tc: TileRun) -> None:
    a = tc.matrix(BASIC.replace("version: 1", "version: 0"), "a.yaml")
    b = tc.matrix(BASIC.replace("bf16", "bf15"), "b.yaml")
    result = tc.run("--tile-matrix", "b.yaml", matrix="a.yaml")
    assert matrix_errors(result, a) == ["1:1: unsupported matrix version 0; this plugin reads version 1"]
    assert [e.split(": ", 1)[0] for e in matrix_errors(result, b)] == ["5:5"] * 3


def test_union_branches_do_not_add_spurious_errors(tc: TileRun) -> None:
    """``rows`` is a count or a list: a bad list item must not also report 'should be an int'.

    The position is the bad item's own (column 24 is the ``-`` of ``-1``)."""
    path = tc.matrix(BASIC.replace(PROBLEM, "problems: [{rows: [-1], n: 8, k: 8}]"))
    assert matrix_errors(tc.run(), path) == [
        "7:24: suites.0.problems.0.rows.0: Input should be greater than or equal to 0"
    ]


UNNAMED = """\
version: 1
backend: fake
defaults:
  arch: sm90
  problems:
    - {experts: 2, rows: 64, n: 256, k: 128}
    - {experts: 4, rows: [0, 1, 77, 300], n: 384, k: 512}
suites:
  - dtype: bf16
    tile: [128x64x64, 256x128x64]
    fusion: [none, finalize]
  - dtype: fp16
    tile: 128x64x64
"""

NAME_THEM = [
    "  problems:",
    '    - {name: "p1", experts: 2, rows: [64, 64], n: 256, k: 128}',
    '    - {name: "p2", experts: 4, rows: [0, 1, 77, 300], n: 384, k: 512}',
]


def test_unnamed_problems_are_one_error_that_shows_how_to_name_them(tc: TileRun) -> None:
    """Eight bf16 and one fp16 case collide, all for one reason: the error is said once, at the
    problem that collides, and shows the problems with names."""
    path = tc.matrix(UNNAMED)
    result = tc.run()
    assert matrix_errors(result, path) == [
        "7:7: problems 1 and 2 of this list have no name, so they give the same case ids "
        "(e.g. 'sm90-bf16-128x64x64-c1x1x1-none'): a case id tells problems apart only by their "
        "names. Name them, e.g."
    ]
    at = result.errlines.index(f"{path}:" + matrix_errors(result, path)[0])
    assert result.errlines[at + 1 : at + 4] == NAME_THEM
    assert result.errlines[at + 4 :] in ([], [""])
    assert output(result).count("have no name") == 1


def test_the_suggested_names_make_the_matrix_load(tc: TileRun) -> None:
    fixed = UNNAMED.replace(
        "  problems:\n"
        "    - {experts: 2, rows: 64, n: 256, k: 128}\n"
        "    - {experts: 4, rows: [0, 1, 77, 300], n: 384, k: 512}\n",
        "\n".join(NAME_THEM) + "\n",
    )
    tc.matrix(fixed)
    ids = tc.collect()
    assert len(ids) == 10
    assert "m.yaml::sm90-bf16-256x128x64-c1x1x1-finalize-p2" in ids


def test_three_unnamed_problems_in_a_tile_entry(tc: TileRun) -> None:
    path = tc.matrix(
        BASIC.replace(
            PROBLEM,
            "tile: {shape: 64x64x64, problems: [{experts: 1, rows: 8, n: 8, k: 8}, "
            "{experts: 1, rows: 16, n: 8, k: 8}, {experts: 1, rows: 32, n: 8, k: 8}]}",
        ).replace("    tile: [128x64x64, 128x128x64, 256x128x64]\n", "")
    )
    result = tc.run()
    errors = matrix_errors(result, path)
    assert len(errors) == 1
    assert errors[0].startswith("6:75: problems 1, 2 and 3 of this list have no name")
    result.stderr.fnmatch_lines(
        [
            '    problems: [{name: "p1", experts: 1, rows: [8], n: 8, k: 8}, '
            '{name: "p2", experts: 1, rows: [16], n: 8, k: 8}, '
            '{name: "p3", experts: 1, rows: [32], n: 8, k: 8}]'
        ]
    )


def test_a_matrix_error_is_printed_once_under_xdist(tc: TileRun) -> None:
    path = tc.matrix(UNNAMED)
    result = tc.run_subprocess("-n", "2")
    assert len(matrix_errors(result, path)) == 1
    assert output(result).count("have no name") == 1


def test_the_readmes_example_matrix_loads() -> None:
    """The example a newcomer copies from README.md is a valid matrix, and its expectation names
    one of its cases (a stale id there is refused like any other)."""
    readme = (REPO / "README.md").read_text()
    example = readme.split("## The matrix format (version 1)")[1].split("```yaml\n")[1].split("```")[0]
    loaded = load_matrix(Path("README-example.yaml"), TEST_KINDS, {"flashinfer-cutlass-moe"}, text=example)
    expected = [c for c in loaded.cases if c.expectation is not None]
    assert [c.id for c in expected] == ["sm90-fp8_e4m3xint4-bf16-128x128x512-c1x1x1-none-cooperative-swapab"]
    assert {c.arch for c in loaded.cases} == {"sm90", "sm100", "sm103"}
