#!/usr/bin/env python3
"""Write tests/data/pinned-actions.json: what each action the example workflow pins offers at its
pinned tag (the commit, the inputs and outputs its action.yml declares, and for
Jimver/cuda-toolkit the CUDA versions its Linux list holds), read from git snapshots of the
actions' repositories, one bare repository per action at MIRRORS/OWNER+NAME/repo.

    python3 scripts/pinned-actions.py MIRRORS [OWNER/NAME@TAG ...]

Every `uses:` of examples/github-actions/tileconform.yml is recorded; extra OWNER/NAME@TAG
arguments record other releases too (the test shows why an older pin fails). The file holds facts
about those files, not the files: tests/distribution/test_example_workflow.py checks the workflow against it.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

REPO = Path(__file__).resolve().parent.parent
WORKFLOW = REPO / "examples" / "github-actions" / "tileconform.yml"
OUTPUT = REPO / "tests" / "data" / "pinned-actions.json"
#: the file Jimver/cuda-toolkit checks a requested version against on Linux (both methods)
CUDA_VERSIONS = "src/links/linux-links.ts"


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


def _uses() -> list[str]:
    workflow = YAML(typ="safe").load(WORKFLOW.read_text())
    return sorted({s["uses"] for job in workflow["jobs"].values() for s in job["steps"] if "uses" in s})


def record(mirrors: Path, uses: str) -> dict[str, Any]:
    action, _, tag = uses.partition("@")
    repo = mirrors / action.replace("/", "+") / "repo"
    commit = _git(repo, "rev-parse", f"{tag}^{{commit}}").strip()
    name = next(n for n in ("action.yml", "action.yaml") if n in _git(repo, "ls-tree", "--name-only", commit))
    meta = YAML(typ="safe").load(_git(repo, "show", f"{commit}:{name}"))
    inputs = {
        key: {"required": bool(spec.get("required", False)), "default": "default" in spec}
        for key, spec in (meta.get("inputs") or {}).items()
    }
    entry: dict[str, Any] = {
        "repository": action,
        "tag": tag,
        "commit": commit,
        "file": name,
        "runs": meta["runs"]["using"],
        "inputs": inputs,
        "outputs": sorted(meta.get("outputs") or {}),
    }
    if action == "Jimver/cuda-toolkit":
        links = _git(repo, "show", f"{commit}:{CUDA_VERSIONS}")
        versions = sorted(
            set(re.findall(r"\[\s*'(\d+\.\d+\.\d+)'", links)), key=lambda v: [int(p) for p in v.split(".")]
        )
        entry["cuda_versions"] = {"file": CUDA_VERSIONS, "linux": versions}
    return entry


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    mirrors, extra = Path(argv[0]), argv[1:]
    facts = {uses: record(mirrors, uses) for uses in sorted({*_uses(), *extra})}
    OUTPUT.write_text(json.dumps(facts, indent=1, sort_keys=True) + "\n")
    print(f"{OUTPUT}: {len(facts)} action release(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
