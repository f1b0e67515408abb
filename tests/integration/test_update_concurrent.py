"""--tile-update from several processes at once: two shards of a 5,000-case matrix whose every
case fails update it together while a hand edit lands in the middle; every change and the edit
survive, the one change that conflicts with the edit is refused, not written, and the 5,000
entries written (about 70,000 YAML nodes counted field by field, more than a user's matrix may
have) load again: an expectation entry counts two nodes (matrix/bounds.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from helpers.fake_backend import FAKE_CONFTEST, QUIET, TEST_KINDS, TileRun

from pytest_tileconform.matrix.load import load_matrix

PROBLEMS = 1000
TILES = ["128x64x64", "128x128x64", "256x128x64", "64x64x64", "64x128x64"]
HAND = "sm90-bf16-64x64x64-c1x1x1-none-p7"  # the run agrees with its entry; a hand edit changes it
CONFLICT = "sm90-bf16-64x64x64-c1x1x1-none-p8"  # the run and a hand edit both change it

#: The fake backend, and a verdict hook that edits the matrix by hand (read, replace, write in
#: place) once both runs have loaded it and are judging cases.
EDITING_CONFTEST = (
    "import functools\n"
    + FAKE_CONFTEST.replace("def _table():", "@functools.cache  # read once\ndef _table():").replace(
        '    _log("verdicts.jsonl", {"id": case.id, "outcome": verdict.outcome})\n',
        '    _log("verdicts.jsonl", {"id": case.id, "outcome": verdict.outcome})\n    _hand_edit(case)\n',
    )
    + """
import time


def _hand_edit(case):
    if not (HERE / "edit.json").exists():
        return
    mine = HERE / f"judging.{os.getpid()}"
    if mine.exists():
        return
    mine.touch()
    # both runs have loaded the matrix before it is edited: wait for the other to judge a case
    deadline = time.monotonic() + 120
    while len(list(HERE.glob("judging.*"))) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    try:  # the first of the two makes the edit, once
        os.close(os.open(HERE / "edit.done", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return
    from pytest_tileconform.matrix.update import matrix_lock

    edit = json.loads((HERE / "edit.json").read_text())
    matrix = HERE / "m.yaml"
    with matrix_lock(matrix, 60):  # an editor does not lock; here it makes the test deterministic
        text = matrix.read_text(encoding="utf-8")
        for old, new in edit["replace"]:
            assert old in text, old
            text = text.replace(old, new)
        matrix.write_text(text, encoding="utf-8")
"""
)


def big_matrix() -> str:
    problems = "\n".join(
        f"      - {{name: p{i}, experts: 1, rows: 64, n: 256, k: 128}}" for i in range(PROBLEMS)
    )
    return (
        "version: 1\nbackend: fake\n# generated\nsuites:\n  - arch: sm90\n    dtype: bf16\n"
        f"    tile: [{', '.join(TILES)}]\n    problems:\n{problems}\n"
        "expectations:\n"
        f"  {HAND}: {{stage: compile}}\n"
        f"  {CONFLICT}: {{stage: compile}}\n"
    )


def _pytest(tc: TileRun, *args: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "PYTEST_XDIST_WORKER", "PYTEST_ADDOPTS")}
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pytest",
            "--tile-matrix",
            "m.yaml",
            *QUIET,
            "-p",
            "no:cacheprovider",
            "--tb=no",
            *args,
        ],
        cwd=tc.path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def test_two_shards_and_a_hand_edit_all_survive(tc: TileRun) -> None:
    tc.pytester.makeconftest(EDITING_CONFTEST)
    path = tc.matrix(big_matrix())
    ids = [c.id for c in load_matrix(path, TEST_KINDS).cases]
    assert len(ids) == 5000
    failing = ids  # every case: the update is larger than a user's matrix may be
    verdicts: dict[str, object] = {i: "initialize" for i in failing}
    verdicts[HAND] = "compile"  # agrees with the matrix as it started: no change from the runs
    tc.verdicts(verdicts)
    (tc.path / "edit.json").write_text(
        json.dumps(
            {
                "replace": [
                    ["# generated\n", "# generated\n# a comment added by hand during the run\n"],
                    [f"{HAND}: {{stage: compile}}", f'{HAND}: {{stage: launch, reason: "by hand"}}'],
                    [f"{CONFLICT}: {{stage: compile}}", f'{CONFLICT}: {{stage: run, reason: "by hand"}}'],
                ],
            }
        )
    )
    started = time.monotonic()
    runs = [_pytest(tc, "--tile-update", "--tile-shard", f"{i}/2") for i in (1, 2)]
    outputs = [run.communicate(timeout=600)[0] for run in runs]
    elapsed = time.monotonic() - started
    for run, out in zip(runs, outputs, strict=True):
        # the cases fail (the matrix did not expect them to); a shard that recorded every failure
        # exits 0, the one whose change was refused for the hand edit exits 1
        assert run.returncode == (1 if "NOT updated (conflict)" in out else 0), out
    assert sorted(run.returncode for run in runs) == [0, 1]
    both = "\n".join(out[out.index("tileconform --tile-update") :] for out in outputs)
    assert f"{CONFLICT}: compile -> initialize: its expectation was edited during the run" in both, both
    assert "NOT updated (conflict)" in both
    text = path.read_text(encoding="utf-8")
    assert "# a comment added by hand during the run\n" in text
    loaded = load_matrix(path, TEST_KINDS)
    expectations = loaded.model.expectations or {}
    assert expectations[HAND].stage == "launch" and expectations[HAND].reason == "by hand"
    assert expectations[CONFLICT].stage == "run" and expectations[CONFLICT].reason == "by hand"
    changed = [i for i in failing if i not in (HAND, CONFLICT)]
    assert len(changed) == 4998
    assert all(expectations[i].stage == "initialize" for i in changed)
    assert len(expectations) == 5000
    assert [p.name for p in tc.path.iterdir() if p.name.startswith(".m.yaml")] == []  # no lock, no temp
    assert (tc.path / "edit.done").exists()
    print(f"two concurrent 2,500-case --tile-update shards, every case failing: {elapsed:.1f} s")
