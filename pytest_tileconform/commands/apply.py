"""``tileconform report apply MATRIX RESULTS.json ...``: write the verdicts of ``--tile-report``
files into a matrix's expectations, as ``--tile-update`` would have written them in the runs that
made the files.

A GPU runner's results file is an artifact; the matrix lives in the checkout. Applying the file
there writes the same lines the runner's own ``--tile-update`` would have written: the decision is
:func:`..matrix.expect.expectation_update`, and the write is :func:`..matrix.update.update_matrix`
(under the matrix's lock, atomic, refusing an entry edited meanwhile). Several files, such as
the slices of one matrix judged in separate calls, are applied in one write, in the order given.

A file's verdict counts for a case only where it judged the case's coordinates (the
backend's axes): the same id meaning another case, or two files that disagree on a case, is refused
before anything is written.
"""

from __future__ import annotations

import argparse
import functools
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from .inputs import read_document
from .output import EXIT_FLAGGED, EXIT_OK, CommandError, emit, message

if TYPE_CHECKING:
    from pydantic import BaseModel

    from ..matrix.kinds import CaseKind
    from ..matrix.load import LoadedMatrix
    from ..matrix.rewrite import Change
    from ..verdict import Verdict

#: How many refused cases an error lists before it counts the rest.
SHOWN = 10


def observed(
    matrix: LoadedMatrix, paths: list[Path], typed: Sequence[type[BaseModel]] = ()
) -> tuple[dict[str, Verdict], int]:
    """Each case of ``matrix`` that a file judged, with its verdict (of the last file that
    judged it: files agree on stage and status, and a later run's reason and shared memory are
    the ones to keep), and how many judged cases of the files are not in the matrix; the
    coordinates are compared as the backends' records (``typed``) read them. Raises
    :class:`.output.CommandError` listing every case judged on other coordinates and every case
    the files disagree on."""
    from ..matrix.expect import describe_observed
    from ..results.model import CaseRecord

    cases = {case.id: case for case in matrix.cases}
    records = {case_id: CaseRecord.model_validate(case.record()) for case_id, case in cases.items()}
    verdicts: dict[str, tuple[Path, Verdict]] = {}
    others = 0
    problems: list[str] = []
    for path in paths:
        for entry in read_document(path).cases:
            if entry.verdict is None:
                continue  # skipped, or not judged: nothing to record
            if entry.id not in cases:
                others += 1
                continue
            record = records[entry.id]
            if entry.case is None or not entry.case.same_case(record, typed):
                there = {} if entry.case is None else entry.case.model_dump()
                here = record.model_dump()
                differ = ", ".join(
                    f"{name} {there.get(name)!r} there, {here.get(name)!r} here"
                    for name in dict.fromkeys([*there, *here])
                    if there.get(name) != here.get(name)
                )
                problems.append(
                    f"{path}: {entry.id}: judged other coordinates than the matrix's case ({differ})"
                )
                continue
            verdict = entry.verdict.to_verdict()
            before = verdicts.get(entry.id)
            if before is not None and describe_observed(before[1]) != describe_observed(verdict):
                problems.append(
                    f"{entry.id}: {before[0]} says {describe_observed(before[1])}, "
                    f"{path} says {describe_observed(verdict)}"
                )
                continue
            verdicts[entry.id] = (path, verdict)
    if problems:
        more = f"\n... and {len(problems) - SHOWN} more" if len(problems) > SHOWN else ""
        raise CommandError(f"{matrix.path}: nothing written:\n" + "\n".join(problems[:SHOWN]) + more)
    return {case_id: verdict for case_id, (_, verdict) in verdicts.items()}, others


def changes_for(matrix: LoadedMatrix, verdicts: dict[str, Verdict]) -> dict[str, Change]:
    """What ``--tile-update`` writes for these verdicts, in the matrix's case order."""
    from ..matrix.expect import expectation_update

    changes: dict[str, Change] = {}
    for case in matrix.cases:
        verdict = verdicts.get(case.id)
        change = None if verdict is None else expectation_update(case.id, case.expectation, verdict)
        if change is not None:
            changes[case.id] = change
    return changes


def main(kinds: dict[str, CaseKind], args: argparse.Namespace) -> int:
    """``kinds``: what the plugins declare of their backends' cases (:mod:`..matrix.kinds`)."""
    from ..matrix.kinds import records_of
    from ..matrix.load import MatrixInvalid, load_matrix
    from ..matrix.update import ChangedMeanwhile, UpdateRefused, update_matrix

    path: Path = args.matrix
    try:
        matrix = load_matrix(path, kinds)
    except MatrixInvalid as exc:
        raise CommandError(str(exc)) from None
    except OSError as exc:
        raise CommandError(f"{path}: {exc.strerror or exc}") from None
    verdicts, others = observed(matrix, args.results, records_of(kinds.values()))
    if others:
        message(f"{others} judged case(s) of these files are not in {path}: left out")
    if not verdicts:
        raise CommandError(f"no case of {path} has a verdict in these files")
    changes = changes_for(matrix, verdicts)
    judged = f"{len(verdicts)} of the matrix's {len(matrix.cases)} case(s) judged in these files"
    if not changes:
        emit(f"{path}: no expectation changed: {judged} agree with it", None)
        return EXIT_OK
    if args.check:
        lines = [f"{path}: {len(changes)} expectation(s) would change ({judged}):"]
        emit("\n".join([*lines, *(f"  {c.describe()}" for c in changes.values())]), None)
        return EXIT_FLAGGED
    started = {case.id: case.expectation for case in matrix.cases if case.id in changes}
    try:
        outcome = update_matrix(path, kinds, changes, started)
    except ChangedMeanwhile as exc:  # a hand edit kept, as an entry edited meanwhile is: exit 1
        raise CommandError(f"{path}: not updated: {exc}", EXIT_FLAGGED) from None
    except (UpdateRefused, MatrixInvalid, ValueError, OSError) as exc:
        raise CommandError(f"{path}: not updated: {exc}") from None
    emit("\n".join(outcome.lines(path)), None)
    return EXIT_FLAGGED if outcome.refused else EXIT_OK


def add_parser(
    actions: argparse._SubParsersAction[argparse.ArgumentParser], kinds: dict[str, CaseKind]
) -> None:
    apply = actions.add_parser(
        "apply",
        help="write the verdicts of results files into a matrix's expectations",
        description="Write the verdicts of --tile-report files into MATRIX's expectations, as "
        "--tile-update would have in the runs that made them (a GPU runner's artifact applied "
        "to the checkout; the slices of one matrix judged in separate calls, in one write). A "
        "file's verdict counts only for a case of the same coordinates; files that judged "
        "another case under an id, or that disagree on a case, are refused and nothing is "
        "written. Exit 1 when --check finds changes, or an entry edited meanwhile (or the whole "
        "file, saved while the update wrote it) was kept and nothing of it overwritten.",
    )
    apply.add_argument("matrix", type=Path, metavar="MATRIX", help="the matrix to update")
    apply.add_argument("results", nargs="+", type=Path, metavar="RESULTS.json", help="--tile-report files")
    apply.add_argument(
        "--check", action="store_true", help="write nothing; list what would change, exit 1 if anything would"
    )
    apply.set_defaults(handler=functools.partial(main, kinds))
