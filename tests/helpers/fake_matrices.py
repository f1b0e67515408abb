"""Matrices and verdict tables of the fake backend that several tests run: the stage-aware
outcomes matrix (one case per (expected, observed) pair) and the --tile-update round trip
(ORIGINAL, observed OBSERVED, rewritten to UPDATED)."""

from __future__ import annotations

OUTCOMES_MATRIX = """\
version: 1
backend: fake
suites:
  - arch: sm90
    dtype: bf16
    problems: {experts: 2, rows: 64, n: 256, k: 128}
    tile:
      - 64x64x64     # expected pass, passes
      - 128x64x64    # expected pass, rejected at initialize
      - 128x128x64   # expected initialize, rejected at initialize
      - 128x256x64   # expected initialize, rejected at compile
      - 256x128x64   # expected initialize, passes
      - 256x256x64   # expected run, virtual verdict through launch
      - 64x128x64    # expected launch, virtual verdict through launch, rejected at launch
  - arch: sm100
    dtype: bf16
    problems: {experts: 2, rows: 64, n: 256, k: 128}
    tile: 64x64x64
expectations:
  sm90-bf16-128x128x64-c1x1x1-none: {stage: initialize, reason: "smem over the opt-in limit"}
  sm90-bf16-128x256x64-c1x1x1-none: {stage: initialize}
  sm90-bf16-256x128x64-c1x1x1-none: {stage: initialize}
  sm90-bf16-256x256x64-c1x1x1-none: {stage: run}
  sm90-bf16-64x128x64-c1x1x1-none: {stage: launch}
"""

OUTCOMES_VERDICTS = {
    "sm90-bf16-128x64x64-c1x1x1-none": {"stage": "initialize", "smem": 240000, "limit": 232448},
    "sm90-bf16-128x128x64-c1x1x1-none": "initialize",
    "sm90-bf16-128x256x64-c1x1x1-none": {"stage": "compile", "detail": "static_assert failed"},
    "sm90-bf16-256x256x64-c1x1x1-none": {
        "stage": "pass",
        "judged_through": "launch",
        "source": "virtual:sm90",
    },
    "sm90-bf16-64x128x64-c1x1x1-none": {"stage": "launch", "judged_through": "launch"},
}

ORIGINAL = """\
# Hopper grouped GEMM tiles.\t
version: 1
backend:   fake    # the fake backend

suites:
  # the main suite
  - arch: sm90
    dtype: bf16
    tile: [128x64x64, 128x128x64, 256x128x64, 64x64x64]
    problems: {experts: 2, rows: 64, n: 256, k: 128}

expectations:
  # smem limits
  sm90-bf16-128x128x64-c1x1x1-none: {stage: initialize, reason: "smem"}   # measured on H100
  sm90-bf16-256x128x64-c1x1x1-none:
    stage: initialize
    smem: 300000
  sm90-bf16-64x64x64-c1x1x1-none: {stage: compile}

# trailing comment
"""

UPDATED = """\
# Hopper grouped GEMM tiles.\t
version: 1
backend:   fake    # the fake backend

suites:
  # the main suite
  - arch: sm90
    dtype: bf16
    tile: [128x64x64, 128x128x64, 256x128x64, 64x64x64]
    problems: {experts: 2, rows: 64, n: 256, k: 128}

expectations:
  # smem limits
  sm90-bf16-128x128x64-c1x1x1-none: {stage: initialize, reason: "smem"}   # measured on H100
  sm90-bf16-64x64x64-c1x1x1-none: {stage: can_implement, status: "kErrorInvalidProblem", source: "fake"}
  sm90-bf16-128x64x64-c1x1x1-none: {stage: initialize, smem: 240000, limit: 232448, source: "fake", reason: "smem over the opt-in limit\\nthe second line is kept"}

# trailing comment
"""  # noqa: E501

OBSERVED = {
    "sm90-bf16-128x64x64-c1x1x1-none": {
        "stage": "initialize",
        "smem": 240000,
        "limit": 232448,
        "detail": "smem over the opt-in limit\nthe second line is kept",
    },
    "sm90-bf16-128x128x64-c1x1x1-none": "initialize",
    "sm90-bf16-64x64x64-c1x1x1-none": {"stage": "can_implement", "status": "kErrorInvalidProblem"},
}
