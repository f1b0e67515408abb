"""Problem presets from real MoE models, their seeded routing, and the pdl and bias axes."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.fake_backend import BASIC, TEST_KINDS, TileRun, matrix_errors
from helpers.paths import REPO

from pytest_tileconform.flashinfer.axes import MoeCase, moe_cases
from pytest_tileconform.flashinfer.presets import (
    GROUPS,
    MODELS,
    PRESETS,
    Preset,
    SplitMix64,
    UnknownPreset,
    describe_presets,
    empty_experts,
    presets_named,
)
from pytest_tileconform.flashinfer.problem import HOST_MAX_ELEMENTS, MAX_ELEMENTS, MAX_ROUTED_ROWS
from pytest_tileconform.matrix.load import load_matrix

PROBLEM = "problems: {experts: 2, rows: 64, n: 256, k: 128}"
ONE_TILE = BASIC.replace("[128x64x64, 128x128x64, 256x128x64]", "128x64x64")


def with_problems(problems: str, extra: str = "") -> str:
    return ONE_TILE.replace(PROBLEM, problems).replace("    dtype: bf16\n", f"    dtype: bf16\n{extra}")


# --- the generator -----------------------------------------------------------------------------


def test_splitmix64_gives_the_published_sequence() -> None:
    """The reference outputs of Vigna's splitmix64.c from state 0: the generator is the
    documented one, not something that merely looks random."""
    rng = SplitMix64(0)
    assert [rng.next() for _ in range(3)] == [0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, 0x06C45D188009454F]


#: Rows per expert of a few presets at seed 0, drawn once by the documented generator; any change
#: to the routing (generator, Zipf weights, empty experts, draw order) changes them.
GOLDEN = {
    "mixtral-gemm1-decode16": (0, 3, 5, 11, 0, 6, 7, 0),
    "mixtral-gemm2-prefill4k": (0, 850, 1315, 3009, 0, 1959, 1059, 0),
}
#: The experts a preset's one token goes to, at seed 0.
GOLDEN_DECODE1 = {
    "dsv3-gemm1-decode1": [54, 87, 182, 183, 207, 210, 228, 240],
    "qwen3-gemm1-decode1": [6, 25, 36, 39, 61, 66, 72, 113],
}


@pytest.mark.parametrize("name", GOLDEN)
def test_golden_rows(name: str) -> None:
    assert PRESETS[name].rows() == GOLDEN[name]


@pytest.mark.parametrize("name", GOLDEN_DECODE1)
def test_golden_one_token_decode(name: str) -> None:
    rows = PRESETS[name].rows()
    assert [e for e, r in enumerate(rows) if r] == GOLDEN_DECODE1[name]
    assert set(rows) == {0, 1}


def test_another_seed_routes_differently_and_the_same_seed_the_same() -> None:
    assert PRESETS["mixtral-gemm1-decode64"].rows(7) == (0, 17, 35, 14, 0, 22, 40, 0)
    assert PRESETS["mixtral-gemm1-decode64"].rows(7) != PRESETS["mixtral-gemm1-decode64"].rows(0)


@pytest.mark.parametrize("preset", PRESETS.values(), ids=list(PRESETS))
def test_every_preset_is_a_top_k_routing_with_empty_and_hot_experts(preset: Preset) -> None:
    rows = preset.rows()
    model = preset.model
    assert len(rows) == model.experts
    assert sum(rows) == preset.tokens * model.top_k
    assert max(rows) <= preset.tokens
    for empty in empty_experts(model.experts):  # first, middle and last
        assert rows[empty] == 0
    assert (0, model.experts // 2, model.experts - 1) == empty_experts(model.experts)
    if preset.phase == "prefill":  # hot experts: the busiest takes far more than an even share
        assert max(rows) > 2 * preset.tokens * model.top_k / model.experts
        assert max(rows) % 128 and max(rows) % 256  # a partial M tile for every SM90 tile M


def test_the_two_gemms_of_a_model_share_the_routing() -> None:
    """The tokens that go through gate/up go through down: one batch, the same rows."""
    for gemm1 in (p for p in PRESETS.values() if p.gemm == 1):
        gemm2 = PRESETS[gemm1.name.replace("-gemm1-", "-gemm2-")]
        assert gemm1.rows(3) == gemm2.rows(3)


def test_shapes_from_the_models() -> None:
    assert (PRESETS["dsv3-gemm1-prefill4k"].n, PRESETS["dsv3-gemm1-prefill4k"].k) == (4096, 7168)
    assert (PRESETS["dsv3-gemm2-prefill4k"].n, PRESETS["dsv3-gemm2-prefill4k"].k) == (7168, 2048)
    assert (PRESETS["qwen3-gemm1-decode1"].n, PRESETS["qwen3-gemm1-decode1"].k) == (1536, 2048)
    assert (PRESETS["gptoss-gemm2-decode1"].n, PRESETS["gptoss-gemm2-decode1"].k) == (2880, 2880)
    assert (PRESETS["mixtral-gemm1-decode1"].n, PRESETS["mixtral-gemm1-decode1"].k) == (28672, 4096)
    assert [(m.key, m.experts, m.top_k, m.bias) for m in MODELS] == [
        ("dsv3", 256, 8, False),
        ("qwen3", 128, 8, False),
        ("gptoss", 128, 4, True),
        ("mixtral", 8, 2, False),
    ]


def test_names_and_groups() -> None:
    assert len(PRESETS) == 40
    assert [p.name for p in presets_named("dsv3-gemm2")] == [
        "dsv3-gemm2-decode1",
        "dsv3-gemm2-decode16",
        "dsv3-gemm2-decode64",
        "dsv3-gemm2-prefill4k",
        "dsv3-gemm2-prefill16k",
    ]
    assert len(presets_named("qwen3-decode")) == 6
    assert len(presets_named("gptoss-gemm1-prefill")) == 2
    assert len(presets_named("mixtral")) == 10
    assert not set(GROUPS) & set(PRESETS)
    with pytest.raises(UnknownPreset, match="did you mean dsv3-decode"):
        presets_named("dsv3-decod")


def test_every_preset_loads_and_the_largest_needs_a_gpu() -> None:
    from pytest_tileconform.flashinfer.problem import PresetRef

    problems = [p for m in MODELS for p in PresetRef(preset=m.key).expand()]
    largest = max(problems, key=lambda p: p.elements)
    assert largest.name == "dsv3-gemm1-prefill16k"
    assert HOST_MAX_ELEMENTS < largest.elements <= MAX_ELEMENTS
    refusal = largest.host_refusal()
    assert refusal is not None and "judged only where a GPU makes them" in refusal
    assert PRESETS["dsv3-gemm1-decode1"].tokens == 1
    small = next(p for p in problems if p.name == "mixtral-gemm2-decode1")
    assert small.host_refusal() is None


def test_listing_shows_rows() -> None:
    text = describe_presets(("mixtral-gemm1-decode16",), rows=True)
    assert "mixtral-gemm1-decode16" in text and "  rows: [0, 3, 5, 11, 0, 6, 7, 0]" in text
    assert (
        describe_presets(("mixtral-gemm1-decode16",), seed=5)
        .splitlines()[1]
        .startswith("mixtral-gemm1-decode16-s5 ")
    )


# --- presets in a matrix, as users run it -------------------------------------------------------


def test_presets_by_name_next_to_explicit_shapes(tc: TileRun) -> None:
    tc.matrix(
        with_problems(
            "problems: [mixtral-gemm1-decode, {name: mine, experts: 2, rows: 1, n: 64, k: 64}, "
            "{preset: gptoss-gemm2-decode1, seed: 9}]",
            "    fusion: finalize\n",
        )
    )
    assert tc.collect() == [
        "m.yaml::sm90-bf16-128x64x64-c1x1x1-finalize-mixtral-gemm1-decode1",
        "m.yaml::sm90-bf16-128x64x64-c1x1x1-finalize-mixtral-gemm1-decode16",
        "m.yaml::sm90-bf16-128x64x64-c1x1x1-finalize-mixtral-gemm1-decode64",
        "m.yaml::sm90-bf16-128x64x64-c1x1x1-finalize-mine",
        "m.yaml::sm90-bf16-128x64x64-c1x1x1-finalize-gptoss-gemm2-decode1-s9",
    ]
    tc.run().assert_outcomes(passed=5)


def test_a_preset_case_is_described_with_its_routing_and_bias(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(
        with_problems("problems: [gptoss-gemm2-decode1, mixtral-gemm1-decode16]", "    pdl: true\n")
    )
    cases = {case.id: case for case in load_matrix(path, TEST_KINDS).cases}
    gptoss = cases["sm90-bf16-128x64x64-c1x1x1-none-pdl-gptoss-gemm2-decode1"].describe()
    assert gptoss["pdl"] is True
    problem = gptoss["problem"]
    assert problem["bias"] is True and problem["tokens"] == 1 and problem["top_k"] == 4
    assert (problem["n"], problem["k"], sum(problem["rows"])) == (2880, 2880, 4)
    mixtral = cases["sm90-bf16-128x64x64-c1x1x1-none-pdl-mixtral-gemm1-decode16"].describe()["problem"]
    assert mixtral == {
        "name": "mixtral-gemm1-decode16",
        "rows": [0, 3, 5, 11, 0, 6, 7, 0],
        "n": 28672,
        "k": 4096,
        "tokens": 16,
        "top_k": 2,
    }


def test_bias_and_seed_of_a_written_problem_are_described(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(with_problems("problems: {name: b, rows: [3, 0], n: 64, k: 64, bias: true, seed: 4}"))
    [case] = load_matrix(path, TEST_KINDS).cases
    assert case.describe()["problem"] == {
        "name": "b",
        "rows": [3, 0],
        "n": 64,
        "k": 64,
        "bias": True,
        "seed": 4,
    }
    assert "pdl" not in case.describe()


@pytest.mark.parametrize(
    ("problems", "where", "text"),
    [
        ("problems: [dsv3-decode, dsv3-decod]", "7:29", "unknown problem preset 'dsv3-decod' (did you mean"),
        ("problems:\n      - qwen3\n      - {preset: qwen4}", "9:9", "unknown problem preset 'qwen4'"),
        ("problems: {preset: mixtral, seed: -1}", "7:33", "greater than or equal to 0"),
        (
            "problems: [mixtral-gemm1-decode1, mixtral-decode]",
            "7:39",
            "of this list both give a problem named 'mixtral-gemm1-decode1' (a preset's name",
        ),
        (
            "problems: {name: r, rows: [1, 2], n: 8, k: 8, tokens: 2, top_k: 2}",
            "7:5",
            "rows sum to 3, not tokens x top_k = 4",
        ),
        ("problems: {name: r, rows: [1, 2], n: 8, k: 8, tokens: 2}", "7:5", "given together"),
    ],
)
def test_bad_presets_are_reported_where_they_are(tc: TileRun, problems: str, where: str, text: str) -> None:
    path = tc.matrix(with_problems(problems))
    [error] = matrix_errors(tc.run(), path)
    assert error.startswith(f"{where}: ") and text in error, error


def test_routing_a_thousand_seeds_is_refused_before_drawing(tc: TileRun) -> None:
    seeds = ", ".join(f"{{preset: dsv3-prefill16k, seed: {s}}}" for s in range(1000))
    path = tc.matrix(with_problems(f"problems: [{seeds}]"))
    [error] = matrix_errors(tc.run("--tile-max-cases", "100000"), path)
    assert f"more than the {MAX_ROUTED_ROWS:,} a matrix may draw" in error


# --- the pdl axis --------------------------------------------------------------------------------


def test_pdl_axis_ids(tc: TileRun) -> None:
    tc.matrix(
        ONE_TILE.replace(
            "    tile: 128x64x64\n", "    tile:\n      - 128x64x64\n      - {shape: 256x128x64, pdl: false}\n"
        )
        .replace("    dtype: bf16\n", "    dtype: bf16\n    pdl: [true, false]\n")
        .replace(PROBLEM, "problems: {name: p, experts: 2, rows: 64, n: 256, k: 128}")
    )
    assert tc.collect() == [
        "m.yaml::sm90-bf16-128x64x64-c1x1x1-none-pdl-p",
        "m.yaml::sm90-bf16-128x64x64-c1x1x1-none-nopdl-p",
        "m.yaml::sm90-bf16-256x128x64-c1x1x1-none-nopdl-p",
    ]


def test_cases_that_leave_pdl_to_the_backend_keep_their_ids(tc: TileRun) -> None:
    tc.matrix(BASIC)
    assert tc.collect() == [
        "m.yaml::sm90-bf16-128x64x64-c1x1x1-none",
        "m.yaml::sm90-bf16-128x128x64-c1x1x1-none",
        "m.yaml::sm90-bf16-256x128x64-c1x1x1-none",
    ]


def test_pdl_listed_twice_is_one_error(tc: TileRun) -> None:
    path = tc.matrix(with_problems(PROBLEM, "    pdl: [true, true]\n"))
    [error] = matrix_errors(tc.run(), path)
    assert error.startswith("6:17: pdl lists true twice (items 1 and 2)"), error


def test_pdl_must_be_a_boolean(tc: TileRun) -> None:
    path = tc.matrix(with_problems(PROBLEM, "    pdl: yes\n"))
    [error] = matrix_errors(tc.run(), path)
    assert "suites.0.pdl.0: Input should be a valid boolean" in error, error


def test_an_expectation_of_a_pdl_case_is_written_by_update(tc: TileRun) -> None:
    path = tc.matrix(with_problems(PROBLEM, "    pdl: [true, false]\n"))
    tc.verdicts({"sm90-bf16-128x64x64-c1x1x1-none-nopdl": {"stage": "run", "status": "illegal address"}})
    tc.run("--tile-update").assert_outcomes(passed=1, failed=1)
    text = path.read_text()
    assert 'sm90-bf16-128x64x64-c1x1x1-none-nopdl: {stage: run, status: "illegal address"' in text
    tc.run().assert_outcomes(passed=1, xfailed=1)


def test_update_records_a_preset_case_and_the_matrix_still_loads(tc: TileRun) -> None:
    """--tile-update writes by case id and loads the file again, which draws the routing again:
    the same rows, so the written expectation belongs to the same case."""
    path = tc.matrix(
        with_problems("problems: [mixtral-gemm2-decode1, qwen3-gemm2-decode1]", "    fusion: finalize\n")
    )
    case = "sm90-bf16-128x64x64-c1x1x1-finalize-qwen3-gemm2-decode1"
    tc.verdicts({case: {"stage": "initialize", "status": "Error Internal"}})
    tc.run("--tile-update").assert_outcomes(passed=1, failed=1)
    assert f'  {case}: {{stage: initialize, status: "Error Internal"' in path.read_text()
    tc.run().assert_outcomes(passed=1, xfailed=1)


# --- the proposed shipped problems ---------------------------------------------------------------

#: SMs of the H200 the shipped SM90 matrix is recorded on.
H200_SMS = 132


def _extents(case: MoeCase) -> tuple[list[int], list[int]]:
    """What the kernel's M and N run over: each expert's rows and the problem's n, swapped
    under swap_ab (the kernel then computes D transposed)."""
    rows, n = list(case.axes.problem.rows_per_expert), [case.axes.problem.n]
    return (n, rows) if case.axes.swap_ab else (rows, n)


def _tiles(case: MoeCase) -> int:
    """Output tiles of the persistent schedule: per expert, M tiles x N tiles."""
    tile_m, tile_n, _ = case.tile
    over_m, over_n = _extents(case)
    if case.axes.swap_ab:
        return sum(-(-r // tile_n) * -(-over_m[0] // tile_m) for r in over_n)
    return sum(-(-r // tile_m) * -(-over_n[0] // tile_n) for r in over_m)


def _partial(case: MoeCase) -> tuple[bool, bool, bool]:
    """Whether the case has a partial tile along the kernel's M, N and K."""
    tile_m, tile_n, tile_k = case.tile
    over_m, over_n = _extents(case)
    return (
        any(e % tile_m for e in over_m if e),
        any(e % tile_n for e in over_n if e),
        case.axes.problem.k % tile_k != 0,
    )


def test_the_shipped_sm90_problems_give_what_its_header_claims() -> None:
    """For every tile configuration (and swap_ab): several waves on an H200, partial M, N and K
    tiles, empty experts first, middle and last, bias and a one-token decode, PDL on and off."""
    matrix = load_matrix(REPO / "matrices" / "sm90.yaml", TEST_KINDS)
    assert len(matrix.cases) == 2880
    configs: dict[str, list[MoeCase]] = {}
    for case in moe_cases(matrix.cases):  # one configuration: the id without pdl and problem
        configs.setdefault(case.id.split("-pdl-")[0].split("-nopdl-")[0], []).append(case)
    assert len(configs) == 360
    for key, cases in configs.items():
        assert {c.axes.pdl for c in cases} == {True, False}, key
        assert max(_tiles(c) for c in cases) >= 3 * H200_SMS, key
        partial = [_partial(c) for c in cases]
        assert all(any(p[axis] for p in partial) for axis in range(3)), key
        rows = [c.axes.problem.rows_per_expert for c in cases]
        assert any(r[0] == 0 and r[len(r) // 2] == 0 and r[-1] == 0 for r in rows), key
        assert any(c.axes.problem.bias for c in cases), key
        assert any(c.axes.problem.tokens == 1 for c in cases), key
