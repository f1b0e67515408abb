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


def test_the_readme_introduction_is_short() -> None:
    """What a newcomer reads before the reference: what it is, install, a first run, five steps;
    the detail is in docs/ (docs/tour.md) and in the reference section below it."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    introduction, reference = text.split("\n## Reference\n", 1)
    assert len(introduction.split()) < 1500
    assert "### The matrix format (version 1)" in reference
