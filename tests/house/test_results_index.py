"""results/ holds the lab's evidence by question, with one index (results/index.json) that names
every entry, and stays small: under 2 MB, so a clone carries it without thinking."""

from __future__ import annotations

from helpers.evidence import RESULTS, index

#: bytes results/ may hold in all (gzip the reports, drop logs nothing cites)
LIMIT = 2_000_000


def test_results_stay_under_two_megabytes() -> None:
    total = sum(path.stat().st_size for path in RESULTS.rglob("*") if path.is_file())
    assert total < LIMIT, f"results/ holds {total:,} bytes"


def test_every_entry_is_indexed_under_its_question() -> None:
    questions = index()["questions"]
    found = {
        f"{question.name}/{entry.name}"
        for question in RESULTS.iterdir()
        if question.is_dir()
        for entry in question.iterdir()
    }
    loose = sorted(
        p.name
        for p in RESULTS.iterdir()
        if p.name not in (*questions, "index.json", "README.md", "HISTORY.md")
    )
    assert loose == [], "put these under a question's folder and in results/index.json"
    assert sorted(found) == sorted(index()["entries"])
    for name, entry in index()["entries"].items():
        assert name.split("/")[0] in questions, name
        assert entry["machine"] and entry["date"] and entry["what"], name


def test_the_named_reports_exist() -> None:
    missing = [name for name, path in index()["reports"].items() if not (RESULTS / path).is_file()]
    assert missing == []
