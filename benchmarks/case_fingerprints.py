"""Every shipped matrix's cases as one line each: the id, the expectation, the coordinates the
results file records and, for the FlashInfer MoE backend's cases, the build each compiles to (the
sha256 of its generated translation unit and the build cache's key of that unit alone). Two trees
that print the same lines collect the same cases, expect the same verdicts, record them alike and
build byte-identical sources under the same keys: what a refactoring that must not change a
verdict is checked with.

    python benchmarks/case_fingerprints.py [--per-matrix] [--out FILE] [MATRIX ...]

Run it from each tree (``PYTHONPATH=TREE``) and diff the outputs. Needs FlashInfer's sources and
a CUDA toolkit (the build key covers nvcc's version and the sources' fingerprint); no GPU, no
compile. The last line is a digest of all the others; ``--per-matrix`` prints, instead of a line
a case, each matrix's case count and the digest of its lines (small enough to keep).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
from pathlib import Path

from pytest_tileconform.commands.plugins import command_plugins
from pytest_tileconform.compile.cache import BuildSpec
from pytest_tileconform.flashinfer import NAME
from pytest_tileconform.flashinfer.axes import moe_cases
from pytest_tileconform.flashinfer.buildscript import kernel_config, portable_build
from pytest_tileconform.flashinfer.codegen import generate_translation_unit, harness_apart
from pytest_tileconform.flashinfer.features import release_features
from pytest_tileconform.flashinfer.sources import build_salt, find_cuda_home, find_sources
from pytest_tileconform.matrix.load import load_matrix
from pytest_tileconform.results.model import CaseRecord
from pytest_tileconform.virtual.build import runtime_path

MATRICES = Path(__file__).resolve().parent.parent / "matrices"


def lines(paths: list[Path], cache: Path) -> list[str]:
    sources, home = find_sources(), find_cuda_home()
    features, salt = release_features(sources.root), build_salt(sources, home, cache)
    runtime = runtime_path(cache, home)
    commands: dict[int, tuple[str, ...]] = {}
    found = []
    kinds = command_plugins().kinds()  # every installed backend's, as pytest collects them
    for path in paths:
        for case in load_matrix(path, kinds).cases:
            record = CaseRecord.model_validate(case.record()).model_dump(mode="json")
            expected = case.expected, case.expectation.status if case.expectation else None
            fields = [path.name, case.id, json.dumps(expected), json.dumps(record, sort_keys=True)]
            if case.backend == NAME:  # the build this tool generates; another backend's: its ids
                [moe] = moe_cases([case])
                config = kernel_config(moe)
                if config.arch not in commands:
                    commands[config.arch] = portable_build(
                        config, sources, home, runtime, cache, harness_apart(1)
                    )[0]
                source = generate_translation_unit([config], features, sources.version)
                key = BuildSpec(source, commands[config.arch], salt, 0, case.id).key
                fields += [hashlib.sha256(source.encode()).hexdigest()[:16], key]
            found.append("\t".join(fields))
    return found


def _summary(matrix: str, found: list[str]) -> str:
    return f"{matrix}\t{len(found)} cases\t{hashlib.sha256(chr(10).join(found).encode()).hexdigest()}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("matrices", nargs="*", type=Path, help="default: every matrix in matrices/")
    parser.add_argument("--per-matrix", action="store_true", help="a line a matrix: cases, digest")
    parser.add_argument("--out", type=Path, help="default: standard output")
    args = parser.parse_args()
    paths = args.matrices or sorted(MATRICES.glob("*.yaml"))
    with tempfile.TemporaryDirectory(prefix="tc-fingerprints-") as cache:
        found = lines(paths, Path(cache))
    digest = "all\t" + hashlib.sha256("\n".join(found).encode()).hexdigest()
    if args.per_matrix:
        found = [
            _summary(path.name, [line for line in found if line.startswith(path.name + "\t")])
            for path in paths
        ]
    found.append(digest)
    text = "\n".join(found) + "\n"
    if args.out:
        args.out.write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
