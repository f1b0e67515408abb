"""The FlashInfer backend's inputs, file protocol and torch reference (CPU)."""

from __future__ import annotations

import hashlib
import math
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from helpers.cases import make_case

from pytest_tileconform.flashinfer.numerics.blockscale import (
    act_sf_offset,
    decode_ue8m0,
    dequantize_mxfp4,
    dequantize_mxfp8,
    dequantize_nvfp4,
    pack_e2m1,
    swizzle_block_scales,
    unpack_e2m1,
    weight_sf_offset,
)
from pytest_tileconform.flashinfer.numerics.reference import (
    SIMULATED_TOP_K,
    GroupedInputs,
    dequantize,
    exact_k_limit,
    expected_output,
    make_inputs,
    reference_output,
    reference_rows,
    simulate_routing,
)
from pytest_tileconform.flashinfer.numerics.runfiles import OutputFileError, read_output, write_inputs
from pytest_tileconform.flashinfer.numerics.tolerance import compare
from pytest_tileconform.flashinfer.problem import Problem


def hand_inputs(
    rows: tuple[int, ...],
    a: list[list[float]],
    b: list[list[list[float]]],
    *,
    dtype: str = "fp32",
    out: str = "fp32",
    alpha: list[float] | None = None,
    dest: list[int] | None = None,
    router: list[float] | None = None,
    out_rows: int | None = None,
) -> GroupedInputs:
    storage = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp8_e4m3": torch.float8_e4m3fn}
    bt = torch.tensor(b, dtype=torch.float32).to(storage[dtype])
    return GroupedInputs(
        act=dtype,
        weight=dtype,
        out=out,
        fusion="finalize" if dest is not None else "none",
        rows_per_expert=rows,
        n=bt.shape[1],
        k=bt.shape[2],
        a=torch.tensor(a, dtype=torch.float32).reshape(sum(rows), bt.shape[2]).to(storage[dtype]),
        b=bt,
        alpha=None if alpha is None else torch.tensor(alpha, dtype=torch.float32),
        router_scales=None if router is None else torch.tensor(router, dtype=torch.float32),
        dest_row=None if dest is None else torch.tensor(dest, dtype=torch.int32),
        out_rows=out_rows if out_rows is not None else sum(rows),
    )


# ------------------------------------------------------------------------------------------
# Reference math against hand-computed values


def test_reference_two_experts_by_hand() -> None:
    inputs = hand_inputs(
        (1, 2),
        [[1, 2], [3, 4], [5, 6]],
        [[[1, 0], [0, 1]], [[1, 1], [2, -1]]],
    )
    ref = reference_output(inputs, make_case("fp32", rows=[1, 2], n=2, k=2))
    # row 0 (expert 0, identity): [1, 2]; rows 1-2 (expert 1): [a0 + a1, 2 a0 - a1]
    assert ref.dtype == torch.float64
    assert ref.tolist() == [[1, 2], [7, 2], [11, 4]]


def test_reference_skips_experts_with_no_rows() -> None:
    # expert 0 and 2 have no rows; their weights must not be used (they would give 999s)
    inputs = hand_inputs(
        (0, 2, 0),
        [[1, 2], [3, 4]],
        [[[999, 999], [999, 999]], [[1, 1], [2, -1]], [[999, 999], [999, 999]]],
    )
    ref = reference_output(inputs, make_case("fp32", rows=[0, 2, 0], n=2, k=2))
    assert ref.tolist() == [[3, 0], [7, 2]]


def test_reference_all_experts_empty() -> None:
    inputs = hand_inputs((0, 0), [], [[[1.0]], [[2.0]]])
    ref = reference_output(inputs, make_case("fp32", rows=[0, 0], n=1, k=1))
    assert ref.shape == (0, 1)


def test_fp8_alpha_scales_each_expert() -> None:
    inputs = hand_inputs(
        (1, 1),
        [[1, 2], [3, -1]],
        [[[1, 1]], [[2, 1]]],
        dtype="fp8_e4m3",
        out="bf16",
        alpha=[0.5, 4.0],
    )
    assert inputs.a.dtype == torch.float8_e4m3fn
    ref = reference_output(inputs, make_case("fp8_e4m3", rows=[1, 1], n=1, k=2, out="bf16"))
    # expert 0: (1 + 2) * 0.5 = 1.5; expert 1: (6 - 1) * 4 = 20
    assert ref.tolist() == [[1.5], [20.0]]


def test_finalize_scatter_add_with_topk_collisions() -> None:
    # expert 0's rows go to tokens 0 and 1, expert 1's to tokens 0 and 2; token 3 gets nothing
    inputs = hand_inputs(
        (2, 2),
        [[2], [3], [4], [5]],
        [[[1], [-1]], [[10], [20]]],
        alpha=[1.0, 0.5],
        dest=[0, 1, 0, 2],
        router=[0.5, 1.0, 0.25, 2.0],
        out_rows=4,
    )
    ref = reference_output(inputs, make_case("fp32", rows=[2, 2], n=2, k=1, fusion="finalize"))
    # rows: e0 -> [2,-2], [3,-3]; e1 (alpha 0.5) -> [20,40], [25,50]
    # token 0: 0.5*[2,-2] + 0.25*[20,40] = [6, 9]; token 1: [3,-3]; token 2: 2*[25,50]
    assert ref.tolist() == [[6, 9], [3, -3], [50, 100], [0, 0]]


def test_reference_rows_before_finalize() -> None:
    inputs = hand_inputs((1, 1), [[2], [3]], [[[1]], [[10]]], dest=[0, 0], router=[1.0, 1.0], out_rows=1)
    assert reference_rows(inputs).tolist() == [[2], [30]]
    ref = reference_output(inputs, make_case("fp32", rows=[1, 1], n=1, k=1, fusion="finalize"))
    assert ref.tolist() == [[32]]


def test_reference_rejects_inputs_of_another_case() -> None:
    inputs = hand_inputs((1,), [[1.0]], [[[1.0]]])
    with pytest.raises(ValueError, match="another case"):
        reference_output(inputs, make_case("fp32", rows=[1], n=1, k=1, fusion="finalize"))


# ------------------------------------------------------------------------------------------
# Dequantization of block-scaled formats


def test_unpack_e2m1_known_bits() -> None:
    # 0x21: low nibble 1 (0.5), high 2 (1.0); 0xF8: low 8 (-0), high F (-6);
    # 0x7A: low A (-1.0), high 7 (6.0); 0x93: low 3 (1.5), high 9 (-0.5)
    packed = torch.tensor([[0x21, 0xF8, 0x7A, 0x93]], dtype=torch.uint8)
    values = unpack_e2m1(packed)
    assert values.tolist() == [[0.5, 1.0, -0.0, -6.0, -1.0, 6.0, 1.5, -0.5]]
    assert math.copysign(1.0, values[0, 2].item()) == -1.0
    assert torch.equal(pack_e2m1(values), packed)


def test_unpack_e2m1_all_codes() -> None:
    codes = torch.arange(16, dtype=torch.uint8)
    packed = codes | (codes << 4)  # each byte holds the same code twice
    values = unpack_e2m1(packed.reshape(1, 16))[0, ::2]
    assert values.tolist() == [0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6]


def test_pack_e2m1_rejects_unrepresentable() -> None:
    with pytest.raises(ValueError, match="e2m1"):
        pack_e2m1(torch.tensor([0.75, 1.0]))


def test_dequantize_nvfp4_block_scales_and_global_scale() -> None:
    # one row, K = 32: two blocks of 16 elements (8 bytes each)
    block0 = [0x21, 0xF8, 0x7A, 0x00, 0x00, 0x00, 0x00, 0x93]
    block1 = [0x77] * 8  # every element 6.0
    packed = torch.tensor([block0 + block1], dtype=torch.uint8)
    # e4m3 bits: 0x3C = 1.5, 0x30 = 0.5
    scales = torch.tensor([[0x3C, 0x30]], dtype=torch.uint8)
    out = dequantize_nvfp4(packed, scales, 0.5)
    first = [0.5, 1.0, -0.0, -6.0, -1.0, 6.0] + [0.0] * 8 + [1.5, -0.5]
    assert out[0, :16].tolist() == [v * 1.5 * 0.5 for v in first]
    assert out[0, 16:].tolist() == [6.0 * 0.5 * 0.5] * 16
    # scales may also be given as float8_e4m3fn
    same = dequantize_nvfp4(packed, scales.view(torch.float8_e4m3fn), torch.tensor(0.5))
    assert torch.equal(out, same)


def test_dequantize_nvfp4_rejects_wrong_scale_shape() -> None:
    packed = torch.zeros(1, 16, dtype=torch.uint8)
    with pytest.raises(ValueError, match="one per 16"):
        dequantize_nvfp4(packed, torch.zeros(1, 1, dtype=torch.uint8), 1.0)


def test_decode_ue8m0() -> None:
    s = torch.tensor([127, 128, 125, 0, 254, 255], dtype=torch.uint8)
    out = decode_ue8m0(s)
    assert out[:5].tolist() == [1.0, 2.0, 0.25, 2.0**-127, 2.0**127]
    assert math.isnan(out[5].item())


def test_dequantize_mxfp4() -> None:
    # K = 64: two blocks of 32 (16 bytes each); block 0 scale 2**1, block 1 scale 2**-2
    packed = torch.tensor([[0x21] * 16 + [0xF5] * 16], dtype=torch.uint8)
    out = dequantize_mxfp4(packed, torch.tensor([[128, 125]], dtype=torch.uint8))
    assert out[0, :32].tolist() == [1.0, 2.0] * 16  # (0.5, 1.0) * 2
    assert out[0, 32:].tolist() == [0.75, -1.5] * 16  # (3.0, -6.0) * 0.25


def test_dequantize_mxfp8() -> None:
    # e4m3 0x40 = 2.0, 0xC4 = -3.0; scales 2**-1 and 2**3
    bits = torch.tensor([[0x40, 0xC4] * 16 + [0x40] * 32], dtype=torch.uint8)
    out = dequantize_mxfp8(bits, torch.tensor([[126, 130]], dtype=torch.uint8))
    assert out[0, :32].tolist() == [1.0, -1.5] * 16
    assert out[0, 32:].tolist() == [16.0] * 32


# ------------------------------------------------------------------------------------------
# make_inputs


def test_make_inputs_is_deterministic() -> None:
    case = make_case("fp8_e4m3", rows=[4, 0, 7], fusion="finalize", out="bf16")
    one, two, other = make_inputs(case, 7), make_inputs(case, 7), make_inputs(case, 8)
    for name in ("a", "b", "alpha", "router_scales", "dest_row"):
        x, y = getattr(one, name), getattr(two, name)
        assert torch.equal(
            x.view(torch.uint8) if x.dtype == torch.float8_e4m3fn else x,
            y.view(torch.uint8) if y.dtype == torch.float8_e4m3fn else y,
        ), name
    assert one.out_rows == two.out_rows
    assert not torch.equal(one.a.float(), other.a.float())
    assert not torch.equal(one.b.float(), other.b.float())


def test_make_inputs_golden_bytes(tmp_path: Path) -> None:
    """The generator's output is pinned: the same bytes on every machine."""
    inputs = make_inputs(make_case("bf16", rows=[2, 1], n=4, k=8, fusion="finalize"), 1234)
    write_inputs(inputs, tmp_path)
    digest = hashlib.sha256()
    for name in ("a.bin", "b.bin", "router_scales.bin", "dest_row.bin", "problem.txt"):
        digest.update((tmp_path / name).read_bytes())
    # a change here means the same seed now gives other inputs (torch RNG or generator change)
    assert (inputs.a.float() * 2).int().tolist() == [
        [3, 1, -3, 2, -3, -2, 3, 1],
        [-3, -1, -1, 0, -2, 2, -3, 0],
        [1, -2, 3, 2, 0, -2, -1, 2],
    ]
    assert inputs.dest_row is not None and inputs.dest_row.tolist() == [1, 0, 0]
    assert inputs.out_rows == 3
    assert inputs.router_scales is not None and (inputs.router_scales * 8).tolist() == [8, 2, 3]
    assert digest.hexdigest() == ("ffc670db751990a290a9822cfcdf1e9358af0ad79487c419760b3fc160c1178c")


@pytest.mark.parametrize("dtype", ["fp32", "fp16", "bf16", "fp8_e4m3"])
def test_make_inputs_shapes_dtypes_and_exact_grid(dtype: str) -> None:
    out = "bf16" if dtype == "fp8_e4m3" else dtype
    case = make_case(dtype, rows=[3, 0, 5], n=16, k=64, out=out)
    inputs = make_inputs(case, 0)
    storage = {
        "fp32": torch.float32,
        "fp16": torch.float16,
        "bf16": torch.bfloat16,
        "fp8_e4m3": torch.float8_e4m3fn,
    }[dtype]
    assert inputs.a.shape == (8, 64) and inputs.a.dtype == storage
    assert inputs.b.shape == (3, 16, 64) and inputs.b.dtype == storage
    assert inputs.out_rows == 8 and inputs.router_scales is None and inputs.dest_row is None
    for t in (inputs.a.float(), inputs.b.float()):
        assert set(torch.unique(t * 2).tolist()) <= {-3.0, -2.0, -1.0, 0.0, 1.0, 2.0, 3.0}
    if dtype == "fp8_e4m3":
        assert inputs.alpha is not None and inputs.alpha.shape == (3,)
        assert inputs.alpha.dtype == torch.float32
        assert bool((inputs.alpha > 0).all())
    else:
        assert inputs.alpha is None


def test_generated_reference_is_exact() -> None:
    """Grid inputs make the fp32 accumulation equal a float64 computation bit for bit, and the
    expected D is that exact value rounded as the epilogue rounds it (fp32, then the output)."""
    case = make_case("fp8_e4m3", rows=[5, 3], n=8, k=256, out="bf16")
    inputs = make_inputs(case, 3)
    assert inputs.alpha is not None and inputs.fp32_exact
    a, b = inputs.a.double(), inputs.b.double()
    exact = torch.cat([a[:5] @ b[0].T * float(inputs.alpha[0]), a[5:] @ b[1].T * float(inputs.alpha[1])])
    assert torch.equal(reference_rows(inputs), exact)
    ref = reference_output(inputs, case)
    assert ref.dtype == torch.float64
    assert torch.equal(ref, exact.float().to(torch.bfloat16).double())


@pytest.mark.parametrize("rows", [[0, 2], [64] * 16, [1, 7, 0, 3, 30], [0, 0, 0]])
def test_simulated_routing(rows: list[int]) -> None:
    gen = torch.Generator().manual_seed(0)
    dest, router, out_rows = simulate_routing(rows, gen)
    total = sum(rows)
    assert dest.dtype == torch.int32 and router.dtype == torch.float32
    assert dest.shape == (total,) and router.shape == (total,)
    assert out_rows >= max(max(rows), 1)
    assert bool((dest >= 0).all()) and bool((dest < out_rows).all())
    start = 0
    for r in rows:  # within one expert, destinations are distinct (top-k: distinct experts)
        assert len(set(dest[start : start + r].tolist())) == r
        start += r
    load = torch.bincount(dest.long(), minlength=out_rows)
    assert int((load == 0).sum()) >= 1  # some token receives nothing: its D row must be 0
    assert int(load.max()) <= max(SIMULATED_TOP_K, max(rows))
    # router scales are j/8, j in 1..8: three bits, so the epilogue's product stays exact
    assert set((router * 8).tolist()) <= set(range(1, 9))


def test_routing_has_collisions() -> None:
    inputs = make_inputs(make_case("bf16", rows=[64] * 16, fusion="finalize"), 0)
    assert inputs.dest_row is not None
    load = torch.bincount(inputs.dest_row.long(), minlength=inputs.out_rows)
    assert int(load.max()) == SIMULATED_TOP_K  # 1024 rows over 128 routed tokens, balanced
    assert inputs.out_rows == 128 + 8


def test_make_inputs_rejects_unsupported_block_scaled_and_mixed() -> None:
    with pytest.raises(NotImplementedError, match="mxfp4"):
        make_inputs(make_case("mxfp4", out="bf16"), 0)
    with pytest.raises(NotImplementedError, match="mixed"):
        make_inputs(make_case("bf16", weight="fp16", out="bf16"), 0)
    with pytest.raises(ValueError, match="scale block 16"):
        make_inputs(make_case("nvfp4", out="bf16", k=40), 0)


# ------------------------------------------------------------------------------------------
# Block-scaled inputs (SM120 NVFP4 and MXFP8 x MXFP4)


def test_swizzle_block_scales_layout() -> None:
    # 130 rows x 5 scales: padded to 256 x 8, two row tiles of two 512-byte atoms each
    linear = torch.arange(130 * 5, dtype=torch.int64).remainder(251).add(1).to(torch.uint8).reshape(130, 5)
    flat = swizzle_block_scales(linear)
    assert flat.numel() == 256 * 8
    for m, j in [(0, 0), (1, 0), (31, 3), (32, 0), (100, 2), (127, 3), (128, 4), (129, 1)]:
        index = ((m // 128) * 2 + j // 4) * 512 + (m % 32) * 16 + ((m // 32) % 4) * 4 + j % 4
        assert int(flat[index]) == int(linear[m, j]), (m, j)
    assert int(flat.count_nonzero()) == 130 * 5  # the padding is zero


@pytest.mark.parametrize(("act", "weight", "block"), [("nvfp4", "nvfp4", 16), ("mxfp8", "mxfp4", 32)])
def test_block_scaled_inputs_and_reference(act: str, weight: str, block: int) -> None:
    case = make_case(act, weight=weight, out="bf16", rows=[3, 0, 5], n=16, k=64)
    inputs = make_inputs(case, 0)
    assert inputs.a_sf is not None and inputs.b_sf is not None
    assert inputs.a_sf.shape == (8, 64 // block) and inputs.b_sf.shape == (3, 16, 64 // block)
    assert inputs.b.dtype == torch.uint8 and inputs.b.shape == (3, 16, 32)  # packed e2m1
    assert (inputs.alpha is not None) == (act == "nvfp4")
    # The reference is A_deq @ B_deq^T with the linear scales applied per block of K.
    if act == "nvfp4":
        a = dequantize_nvfp4(inputs.a, inputs.a_sf, 1.0)
        b2 = dequantize_nvfp4(inputs.b[2], inputs.b_sf[2], 1.0)
    else:
        a = dequantize_mxfp8(inputs.a, inputs.a_sf)
        b2 = dequantize_mxfp4(inputs.b[2], inputs.b_sf[2])
    expected = a[3:] @ b2.T * (1.0 if inputs.alpha is None else float(inputs.alpha[2]))
    assert torch.equal(reference_rows(inputs)[3:], expected)


def test_write_inputs_nvfp4_scale_files(tmp_path: Path) -> None:
    inputs = make_inputs(make_case("nvfp4", out="bf16", rows=[3, 0, 200], n=16, k=64, fusion="finalize"), 0)
    write_inputs(inputs, tmp_path)
    assert inputs.a_sf is not None and inputs.b_sf is not None
    a_sf = (tmp_path / "a_sf.bin").read_bytes()
    b_sf = (tmp_path / "b_sf.bin").read_bytes()
    # getOffsetActivationSF(E=3, 203 rows, K=64): pad(203 + 3 * 127, 128) rows x 4 scales
    assert len(a_sf) == act_sf_offset(3, 203, 64, 16) == 640 * 4
    assert len(b_sf) == weight_sf_offset(3, 16, 64, 16) == 3 * 128 * 4
    # expert 2 (rows 3..202) starts at pad(3 + 2 * 127, 128) = 384 rows; its row 130, scale 1
    start = act_sf_offset(2, 3, 64, 16)
    assert start == 384 * 4
    assert a_sf[start + 512 + (130 % 32) * 16 + ((130 // 32) % 4) * 4 + 1] == int(inputs.a_sf[3 + 130, 1])
    assert a_sf[(1 % 32) * 16 + 2] == int(inputs.a_sf[1, 2])  # expert 0 at offset 0
    assert b_sf[weight_sf_offset(1, 16, 64, 16) + 5 * 16 + 3] == int(inputs.b_sf[1, 5, 3])
    assert (tmp_path / "a.bin").stat().st_size == 203 * 32 and (tmp_path / "alpha.bin").is_file()


# ------------------------------------------------------------------------------------------
# The file protocol


def test_write_inputs_files_and_sizes(tmp_path: Path) -> None:
    case = make_case("bf16", rows=[3, 0, 5], n=16, k=32)
    inputs = make_inputs(case, 1)
    write_inputs(inputs, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.bin", "b.bin", "problem.txt"]
    assert (tmp_path / "a.bin").stat().st_size == 8 * 32 * 2
    assert (tmp_path / "b.bin").stat().st_size == 3 * 16 * 32 * 2
    assert (tmp_path / "problem.txt").read_text() == "experts 3\nrows 3 0 5\nn 16\nk 32\n"
    a = torch.frombuffer(bytearray((tmp_path / "a.bin").read_bytes()), dtype=torch.bfloat16)
    assert torch.equal(a.reshape(8, 32), inputs.a)


def test_write_inputs_fp8_finalize(tmp_path: Path) -> None:
    case = make_case("fp8_e4m3", rows=[4, 0, 6], n=8, k=16, fusion="finalize", out="fp16")
    inputs = make_inputs(case, 2)
    write_inputs(inputs, tmp_path, extra_problem={"timing_iters": 3})
    sizes = {p.name: p.stat().st_size for p in tmp_path.iterdir()}
    assert sizes == {
        "problem.txt": sizes["problem.txt"],
        "a.bin": 10 * 16,
        "b.bin": 3 * 8 * 16,
        "alpha.bin": 3 * 4,
        "router_scales.bin": 10 * 4,
        "dest_row.bin": 10 * 4,
    }
    lines = (tmp_path / "problem.txt").read_text().splitlines()
    assert lines == [
        "experts 3",
        "rows 4 0 6",
        "n 8",
        "k 16",
        f"out_rows {inputs.out_rows}",
        "timing_iters 3",
    ]
    b = torch.frombuffer(bytearray((tmp_path / "b.bin").read_bytes()), dtype=torch.uint8)
    assert torch.equal(b.view(torch.float8_e4m3fn).float().reshape(3, 8, 16), inputs.b.float())
    dest = torch.frombuffer(bytearray((tmp_path / "dest_row.bin").read_bytes()), dtype=torch.int32)
    assert inputs.dest_row is not None and torch.equal(dest, inputs.dest_row)
    alpha = torch.frombuffer(bytearray((tmp_path / "alpha.bin").read_bytes()), dtype=torch.float32)
    assert inputs.alpha is not None and torch.equal(alpha, inputs.alpha)


@pytest.mark.parametrize("out", ["bf16", "fp16", "fp32"])
@pytest.mark.parametrize("fusion", ["none", "finalize"])
def test_read_output_round_trip(tmp_path: Path, out: str, fusion: str) -> None:
    case = make_case("bf16" if out != "fp32" else "fp32", rows=[3, 5], n=8, k=16, fusion=fusion, out=out)
    inputs = make_inputs(case, 4)
    expected = reference_output(inputs, case)
    torch_out = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[out]
    stored = expected.to(torch_out)
    (tmp_path / "d.bin").write_bytes(stored.view(torch.uint8).numpy().tobytes())
    rows = inputs.out_rows
    assert (tmp_path / "d.bin").stat().st_size == rows * 8 * stored.element_size()
    actual = read_output(tmp_path, inputs)
    assert actual.dtype == torch_out and actual.shape == (rows, 8)  # the bits as written
    assert torch.equal(actual.view(torch.uint8), stored.view(torch.uint8))
    report = compare(actual, expected_output(inputs, case))
    assert report.ok and report.over_bound == 0, report.summary()


def test_read_output_size_mismatch(tmp_path: Path) -> None:
    case = make_case("bf16", rows=[2], n=4, k=8)
    inputs = make_inputs(case, 0)
    with pytest.raises(OutputFileError, match="does not exist"):
        read_output(tmp_path, inputs)
    (tmp_path / "d.bin").write_bytes(b"\x00" * (2 * 4 * 2 - 1))
    with pytest.raises(OutputFileError, match=r"15 bytes, expected 16"):
        read_output(tmp_path, inputs)


# ------------------------------------------------------------------------------------------
# Exactness at real sizes, bias, routing from a token count, devices


@pytest.mark.parametrize(("act", "weight"), [("fp8_e4m3", "fp8_e4m3"), ("bf16", "bf16"), ("nvfp4", "nvfp4")])
@pytest.mark.parametrize("k", [2048, 2880, 7168, 14336])
def test_exact_at_real_model_k(act: str, weight: str, k: int) -> None:
    """DeepSeek-V3, gpt-oss and Mixtral's K: the fp32 accumulation equals fp64, and finalize's
    fp32 epilogue (alpha, bias, router) is exact, so expected_output raises nothing."""
    case = make_case(act, weight=weight, out="bf16", rows=[3, 0, 9], n=8, k=k, fusion="finalize")
    case = replace(case, axes=replace(case.axes, problem=Problem(rows=(3, 0, 9), n=8, k=k, bias=True)))
    assert exact_k_limit(act, weight) > k
    inputs = make_inputs(case, 1)
    a = dequantize(inputs.a, act, inputs.a_sf).double()
    assert inputs.bias is not None and inputs.bias.dtype == torch.bfloat16
    for e, rows in inputs.expert_slices():
        b = dequantize(inputs.b[e], weight, None if inputs.b_sf is None else inputs.b_sf[e]).double()
        exact = a[rows] @ b.T * (1.0 if inputs.alpha is None else float(inputs.alpha[e]))
        assert torch.equal(reference_rows(inputs)[rows], exact)
    expected = expected_output(inputs, case)
    assert expected.bound is not None and expected.value.shape == (inputs.out_rows, 8)


def test_k_beyond_the_exact_limit_is_refused() -> None:
    limit = exact_k_limit("nvfp4", "nvfp4")
    assert limit == 116507 and exact_k_limit("bf16", "bf16") == 1864134
    with pytest.raises(ValueError, match="keep exact in fp32"):
        make_inputs(make_case("nvfp4", out="bf16", rows=[1], n=1, k=(limit // 16 + 1) * 16), 0)


def test_bias_is_finalize_only_and_written(tmp_path: Path) -> None:
    problem = Problem(rows=(2, 0, 3), n=4, k=8, bias=True)
    finalize = make_case("fp16", fusion="finalize")
    finalize = replace(finalize, axes=replace(finalize.axes, problem=problem))
    inputs = make_inputs(finalize, 3)
    assert inputs.bias is not None and inputs.bias.shape == (3, 4) and inputs.bias.dtype == torch.float16
    write_inputs(inputs, tmp_path)
    assert (tmp_path / "bias.bin").read_bytes() == inputs.bias.numpy().tobytes()
    # D[t] = sum router_r * (C[r] + bias_e): the bias moves the expected D by router * bias
    plain = replace(inputs, bias=None)
    delta = reference_output(inputs, finalize) - reference_output(plain, finalize)
    assert inputs.router_scales is not None and inputs.dest_row is not None
    experts = torch.tensor([0, 0, 2, 2, 2])
    by_hand = torch.zeros(inputs.out_rows, 4, dtype=torch.float64).index_add_(
        0, inputs.dest_row.long(), inputs.router_scales.double().unsqueeze(1) * inputs.bias.double()[experts]
    )
    assert torch.allclose(delta, by_hand, atol=2e-3)  # both sides rounded to fp16 per row
    none = replace(finalize, axes=replace(finalize.axes, fusion="none"))
    assert make_inputs(none, 3).bias is None  # no bias operand without the finalize epilogue


def test_routing_from_a_token_count() -> None:
    """A preset's rows come from tokens x top_k: every token receives top_k rows."""
    dest, _, out_rows = simulate_routing([5, 0, 3, 8], torch.Generator().manual_seed(2), 2, tokens=8)
    assert out_rows == 8 and torch.bincount(dest.long(), minlength=8).tolist() == [2] * 8
    with pytest.raises(ValueError, match="more rows than the 4 tokens"):
        simulate_routing([5, 3], torch.Generator().manual_seed(2), 2, tokens=4)


def test_make_inputs_on_an_explicit_device_is_the_cpu_default() -> None:
    case = make_case("nvfp4", out="bf16", rows=[3, 0, 5], n=16, k=64, fusion="finalize")
    default, cpu = make_inputs(case, 9), make_inputs(case, 9, torch.device("cpu"))
    for name in ("a", "b", "a_sf", "b_sf", "alpha", "router_scales", "dest_row"):
        assert torch.equal(getattr(default, name), getattr(cpu, name)), name
    assert cpu.device == torch.device("cpu")


def test_inputs_move_to_another_device_whole() -> None:
    case = make_case("nvfp4", out="bf16", rows=[3, 0, 5], n=16, k=64, fusion="finalize")
    moved = make_inputs(case, 9).to("meta")
    tensors = (moved.a, moved.b, moved.a_sf, moved.b_sf, moved.alpha, moved.router_scales, moved.dest_row)
    assert all(t is not None and t.device.type == "meta" for t in tensors)
    assert moved.device.type == "meta" and moved.rows_per_expert == (3, 0, 5) and moved.fp32_exact
