"""stable_reason and shorten: reasons read the same on every machine and in every run."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_tileconform.reasons import shorten, stable_reason

KEY = "0123456789abcdef0123456789abcdef"
CACHE = "/home/ci/.cache/pytest-tileconform"


@pytest.mark.parametrize(
    ("text", "stable"),
    [
        # nvcc's and gcc's positions in a unit's temporary build folder, under the cache or not
        (
            f"{CACHE}/.build-k3j2x9q1/{KEY}/tu.cu(13): error: static assertion failed",
            "tu.cu(13): error: static assertion failed",
        ),
        (f"/tmp/x/.build-a_b2c3d4/{KEY}/tu.cu:13:5: error: no member", "tu.cu:13:5: error: no member"),
        ("/tmp/tileconform-nvcc-ab12cd34/tu.cudafe1.cpp:7: error", "tu.cudafe1.cpp:7: error"),
        ("/tmp/tileconform-run-zz99yy88/verdict.json: not JSON", "verdict.json: not JSON"),
        ("see /tmp/tmpab12cd34/harness.cu:3", "see harness.cu:3"),
        # the build cache's own entries keep their (content-keyed) names under <cache>
        (f"log: {CACHE}/ab/{KEY}/build.log", f"log: <cache>/ab/{KEY}/build.log"),
        (f"({CACHE})", "(<cache>)"),
        # a sibling folder whose name starts like the cache's is not the cache
        (f"{CACHE}-old/x", f"{CACHE}-old/x"),
        # installed packages, wherever the environment is
        (
            "In file included from /opt/venv/lib/python3.11/site-packages/flashinfer/data/csrc/x.inl:12,",
            "In file included from <site-packages>/flashinfer/data/csrc/x.inl:12,",
        ),
        ("/usr/lib/python3/dist-packages/torch/a.h", "<site-packages>/torch/a.h"),
        # text without paths, and trailing blanks
        (
            "cudaFuncSetAttribute: too much smem  \n  second line \n",
            "cudaFuncSetAttribute: too much smem\n  second line",
        ),
    ],
)
def test_stable_reason(text: str, stable: str) -> None:
    assert stable_reason(text, {"<cache>": CACHE}) == stable


def test_stable_reason_is_idempotent() -> None:
    text = f"{CACHE}/.build-k3j2x9q1/{KEY}/tu.cu(13): error; {CACHE}/ab/{KEY}/build.log"
    once = stable_reason(text, {"<cache>": CACHE})
    assert stable_reason(once, {"<cache>": CACHE}) == once == f"tu.cu(13): error; <cache>/ab/{KEY}/build.log"


def test_the_home_directory_is_tilde(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", "/home/someone")
    assert stable_reason("cannot open /home/someone/src/x.cu") == "cannot open ~/src/x.cu"
    assert stable_reason("/home/someoneelse/x") == "/home/someoneelse/x"


def test_a_cache_given_through_a_link_is_named_either_way(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    places = {"<cache>": tmp_path / "link"}
    assert stable_reason(f"{tmp_path}/link/ab/x and {real}/ab/y", places) == "<cache>/ab/x and <cache>/ab/y"


def test_a_signed_builds_copy_of_an_input_reads_as_the_input() -> None:
    """A signed harness is compiled from copies of FlashInfer's sources in its build folder
    (``compile/inputs.py``): a file name compiled into it reads as the unsigned build's does."""
    signed = "Assertion failed: x (/c/.build-ab12cd34/.inputs/flashinfer/csrc/nv_internal/a.h:512)"
    unsigned = "Assertion failed: x (/opt/fi/flashinfer/data/csrc/nv_internal/a.h:512)"
    expected = "Assertion failed: x (<flashinfer>/csrc/nv_internal/a.h:512)"
    assert stable_reason(signed, {"<cache>": "/c"}) == expected
    assert stable_reason(unsigned, {"<cache>": "/c", "<flashinfer>": "/opt/fi/flashinfer/data"}) == expected


def test_shorten_keeps_text_within_the_limit() -> None:
    assert shorten("a" * 10, 10) == "a" * 10


def test_shorten_cuts_at_a_word_and_says_how_much() -> None:
    text = "alpha beta gamma delta"
    assert shorten(text, 13) == "alpha beta [... 12 characters cut]"
    assert shorten(text, 16) == "alpha beta gamma [... 6 characters cut]"


def test_shorten_prefers_a_line_boundary() -> None:
    text = "first line of the reason\nsecond line that is long"
    assert shorten(text, 30) == "first line of the reason [... 25 characters cut]"


def test_shorten_cuts_a_word_without_blanks_at_the_limit() -> None:
    assert shorten("x" * 50, 20) == "x" * 20 + " [... 30 characters cut]"
