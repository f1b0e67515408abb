"""Hostile matrices: each one loads to a known number of cases or is refused with a known message
at a position, quickly, and never with another exception.

``CORPUS`` is the table: an id, the file's bytes and the expected outcome, either ``Loads(n)``
or ``Refused(text, where)`` (``where`` is ``"LINE:COL"``, or None where only some position is
promised). Large files are generated, not stored. Every entry calls the loader directly, with
a time bound; :mod:`test_matrix_through_pytest` runs a representative subset the way users do,
and the files that are not regular files.
"""

from __future__ import annotations

import textwrap
import time
from pathlib import Path

import pytest
from helpers.fake_backend import BASIC, TEST_KINDS
from helpers.matrix_corpus import CORPUS, LIMIT_S, POSITION, Entry, Loads, Refused

from pytest_tileconform.matrix.bounds import MAX_CASES
from pytest_tileconform.matrix.load import MatrixInvalid, load_matrix

# --- running them ----------------------------------------------------------------------------


def outcome(path: Path, max_cases: int = MAX_CASES) -> Loads | list[str]:
    try:
        return Loads(len(load_matrix(path, TEST_KINDS, {"fake"}, max_cases=max_cases).cases))
    except MatrixInvalid as exc:
        return [str(e) for e in exc.errors]


def check(entry: Entry, found: Loads | list[str], path: Path) -> None:
    expect = entry.expect
    if isinstance(expect, Loads):
        assert found == expect, found
        return
    assert isinstance(found, list), f"loaded {found}, expected a refusal"
    matching = [e for e in found if expect.text in e]
    assert matching, found
    first = matching[0]
    assert first.startswith(f"{path}:"), first
    assert POSITION.match(first[len(str(path)) :]), first
    if expect.where is not None:
        assert first[len(str(path)) + 1 :].startswith(expect.where), first


def test_the_corpus_is_large_and_its_ids_unique() -> None:
    assert len(CORPUS) >= 150
    assert len({e.id for e in CORPUS}) == len(CORPUS)


@pytest.mark.parametrize("entry", CORPUS, ids=[e.id for e in CORPUS])
def test_hostile_matrix(entry: Entry, tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_bytes(entry.data)
    start = time.perf_counter()
    found = outcome(path, entry.max_cases)
    took = time.perf_counter() - start
    check(entry, found, path)
    assert took < LIMIT_S, f"{entry.id} took {took:.1f} s"


def test_the_corpus_documents_itself() -> None:
    """Each refusal names the text it must contain; an empty text is allowed only where the
    entry is about not crashing (YAML that ruamel may read several ways)."""
    vague = [e.id for e in CORPUS if isinstance(e.expect, Refused) and not e.expect.text]
    assert vague == ["complex-key"]


def test_every_tag_form_is_refused_before_construction(tmp_path: Path) -> None:
    """No tag outside the core schema reaches ruamel's constructor, whatever its form: the
    handle ``!!``, the verbatim ``!<...>``, a local ``!x`` in either form, on a scalar, a sequence
    and a mapping, as a value or as a key."""
    forms = ["!!python/object:x", "!<tag:yaml.org,2002:python/object:x>", "!!omap", "!local", "!<!local>"]
    path = tmp_path / "t.yaml"
    for form in forms:
        for node in ("bf16", "[bf16]", "{act: bf16}"):
            for text in (f"x: {form} {node}\n", f"? {form} {node}\n: 1\n"):
                path.write_text(BASIC + text)
                found = outcome(path)
                assert isinstance(found, list), text
                assert any(": tag " in e and "; remove it" in e for e in found), (text, found)
    assert textwrap.dedent(BASIC) == BASIC
