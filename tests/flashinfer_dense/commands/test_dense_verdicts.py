"""The judged dense entries of an arch (:func:`...verdicts.judged`): what the observed verdicts
of ``tactics``/``drift --dense`` and the blocklist's evidence (the MoE export's, given dense keys)
both read."""

from __future__ import annotations

from collections import Counter

from helpers.evidence import matrix_reports, report

from pytest_tileconform.flashinfer.commands.blocklist import gather
from pytest_tileconform.flashinfer_dense.commands.verdicts import judged, observed_verdicts, record_key
from pytest_tileconform.results.store import read_results


def test_judged_keeps_the_dense_entries_of_the_arch_alone() -> None:
    """A dense SM120 report beside an MoE SM120 one: only the dense cases of sm120 are judged
    entries, each with its record's key; the observed verdicts and the blocklist's evidence count
    the same entries."""
    dense = [read_results(p) for p in matrix_reports("gemm-sm120.yaml")]
    moe = read_results(report("sm120-virtual"))
    assert moe.judged() and all(record_key(e.case) is None for e, _ in moe.judged() if e.case)
    found = list(judged([*dense, moe], "sm120"))
    expected = [(e.id, record_key(e.case)) for d in dense for e, _ in d.judged() if e.case]
    assert [(entry.id, key) for _, entry, _, key in found] == expected
    assert found and all(key is not None for _, _, _, key in found)
    assert not list(judged([*dense, moe], "sm100"))
    observed = observed_verdicts([*dense, moe], "sm120")
    assert sum(observed.values(), Counter()).total() == len(found)
    evidence = gather(judged([*dense, moe], "sm120"), accept_virtual=True)
    assert evidence.hardware + evidence.build + evidence.virtual == len(found)
    assert set(evidence.unrun) | evidence.ran | set(evidence.failing) == {key for _, _, _, key in found}
