"""devices.py: counting GPUs without CUDA, and dealing them out to xdist workers."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_tileconform.core.devices import gpu_for_worker, visible_gpus


@pytest.fixture
def proc(tmp_path: Path) -> Path:
    """A fake /proc/driver/nvidia/gpus with three GPUs."""
    gpus = tmp_path / "gpus"
    for bus_id in ("0000:17:00.0", "0000:65:00.0", "0000:ca:00.0"):
        (gpus / bus_id).mkdir(parents=True)
        (gpus / bus_id / "information").write_text("Model: NVIDIA H100\n")
    return gpus


def test_counts_proc_entries_without_mask(proc: Path) -> None:
    assert visible_gpus({}, proc) == ["0", "1", "2"]


def test_no_driver_means_no_gpus(tmp_path: Path) -> None:
    assert visible_gpus({}, tmp_path / "missing") == []


def test_proc_is_a_file_means_no_gpus(tmp_path: Path) -> None:
    (tmp_path / "gpus").write_text("")
    assert visible_gpus({}, tmp_path / "gpus") == []


@pytest.mark.parametrize(
    ("mask", "expected"),
    [
        ("1", ["1"]),
        ("2,0", ["2", "0"]),
        (" 4 , 7 ", ["4", "7"]),
        ("GPU-8f3a2c1e-aaaa-bbbb-cccc-0123456789ab,1", ["GPU-8f3a2c1e-aaaa-bbbb-cccc-0123456789ab", "1"]),
        ("", []),
        ("-1", []),
        ("0,,1", ["0", "1"]),
    ],
)
def test_mask_wins_over_proc(proc: Path, mask: str, expected: list[str]) -> None:
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": mask}, proc) == expected


def test_reads_os_environ_by_default(proc: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "6,7")
    assert visible_gpus(proc=proc) == ["6", "7"]
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert visible_gpus(proc=proc) == ["0", "1", "2"]


@pytest.mark.parametrize(
    ("worker", "gpus", "expected"),
    [
        ("gw0", ["0", "1"], "0"),
        ("gw1", ["0", "1"], "1"),
        ("gw2", ["0", "1"], "0"),
        ("gw3", ["0", "1"], "1"),
        ("gw5", ["4", "6", "7"], "7"),
        ("gw10", ["3"], "3"),
        ("gw0", [], None),
        ("master", ["0"], None),
        ("gw", ["0"], None),
        ("gw1x", ["0"], None),
    ],
)
def test_gpu_for_worker(worker: str, gpus: list[str], expected: str | None) -> None:
    assert gpu_for_worker(worker, gpus) == expected
