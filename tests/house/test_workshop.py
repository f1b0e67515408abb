"""The maintainers' workshop stays out of the product: scripts/ provisions no particular host
(the rented GPU host's needs are lab/, which no distribution carries: tests/distribution), and
the pages a user reads first stay short: BENCHMARKS.md one page of current figures, the README's
introduction before its reference."""

from __future__ import annotations

from helpers.paths import REPO

#: what only the project's rented GPU host needs: its carried wheels and sources, its installer
HOST_PROVISIONING = (".whl/", ".carry/", "gpu-env.sh", "--no-index")


def test_scripts_provision_no_host() -> None:
    found = [
        f"{path.relative_to(REPO)}: {word}"
        for path in sorted((REPO / "scripts").rglob("*"))
        if path.is_file() and path.suffix in (".sh", ".py", ".md")
        for word in HOST_PROVISIONING
        if word in path.read_text(encoding="utf-8")
    ]
    assert found == []


def test_benchmarks_is_one_page_of_current_figures() -> None:
    """History goes with the data (results/HISTORY.md), not on the page of current figures."""
    lines = (REPO / "BENCHMARKS.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) < 300
