"""The results file's one owner: its model, its JSON Schema, reading (and upgrading) and writing.

The schema is checked with a small validator of the JSON Schema keywords pydantic emits (below),
so the test needs no schema library.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import re
import subprocess
import sys
import typing
from pathlib import Path
from typing import Any

import pytest
from helpers.evidence import RESULTS, report
from helpers.fake_backend import TileRun
from helpers.paths import REPO

from pytest_tileconform.commands.cli import main
from pytest_tileconform.results.fingerprint import device_key
from pytest_tileconform.results.model import FORMAT, Outcome, ResultsDocument, VerdictRecord
from pytest_tileconform.results.store import ReportError, dumps, parse_results, read_results, write_results
from pytest_tileconform.verdict import EXPECTATIONS, Device, Stage, Verdict


def _is_results_file(path: Path) -> bool:
    data = path.read_bytes()
    document = json.loads(gzip.decompress(data) if path.suffix == ".gz" else data)
    return isinstance(document, dict) and "format" in document and isinstance(document.get("cases"), list)


#: Every run report kept in results/ (format 1, written before the format had a number 2).
SHIPPED = sorted(
    p for p in RESULTS.rglob("*") if p.name.endswith((".json", ".json.gz")) and _is_results_file(p)
)

MATRIX = """\
version: 1
backend: fake
suites:
  - arch: [sm90, sm100]
    dtype: bf16
    tile: [128x64x64, 256x128x64]
    problems: {experts: 2, rows: 64, n: 256, k: 128}
"""

#: A plugin that says which device judged each verdict and adds to the host fingerprint.
DEVICE_AND_FINGERPRINT = """

from pytest_tileconform.verdict import Device


class _Extras:
    def pytest_tileconform_verdict(self, config, case, verdict):
        if case.tile == (256, 128, 64):
            verdict.device = Device(kind="hardware", name="NVIDIA H200", arch="sm90", cc="9.0")

    def pytest_tileconform_host_fingerprint(self, config):
        return {"fakebackend": "1.2", "flashinfer": None}


def pytest_configure(config):
    config.pluginmanager.register(_Extras(), "extras")
"""


# -- a validator of the JSON Schema keywords pydantic emits ----------------------------------------
_TYPES: dict[str, Any] = {
    "object": dict,
    "array": list,
    "string": str,
    "integer": int,
    "number": (int, float),
    "boolean": bool,
    "null": type(None),
}


def schema_errors(value: Any, schema: dict[str, Any], root: dict[str, Any], where: str = "$") -> list[str]:
    if "$ref" in schema:
        name = schema["$ref"].removeprefix("#/$defs/")
        return schema_errors(value, root["$defs"][name], root, where)
    if "anyOf" in schema:
        found = [schema_errors(value, option, root, where) for option in schema["anyOf"]]
        if any(not errors for errors in found):
            return []
        return min(found, key=len)  # the option it comes closest to says what is wrong
    errors = []
    kind = schema.get("type")
    if kind is not None:
        ok = isinstance(value, _TYPES[kind]) and not (
            kind in ("integer", "number") and isinstance(value, bool)
        )
        if not ok:
            return [f"{where}: {value!r} is not {kind}"]
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{where}: {value!r} not in {schema['enum']}")
    if "const" in schema and value != schema["const"]:
        errors.append(f"{where}: {value!r} is not {schema['const']!r}")
    if "pattern" in schema and isinstance(value, str) and not re.search(schema["pattern"], value):
        errors.append(f"{where}: {value!r} does not match {schema['pattern']}")
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        errors += [f"{where}: missing {key!r}" for key in schema.get("required", []) if key not in value]
        for key, item in value.items():
            if key in properties:
                errors += schema_errors(item, properties[key], root, f"{where}.{key}")
            elif schema.get("additionalProperties") is False:
                errors.append(f"{where}: unknown key {key!r}")
            elif isinstance(schema.get("additionalProperties"), dict):
                errors += schema_errors(item, schema["additionalProperties"], root, f"{where}.{key}")
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            errors += schema_errors(item, schema["items"], root, f"{where}[{i}]")
    return errors


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    """The schema as ``tileconform report schema`` prints it."""
    proc = subprocess.run(
        [sys.executable, "-m", "pytest_tileconform", "report", "schema"],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr
    document: dict[str, Any] = json.loads(proc.stdout)
    return document


def _run(tc: TileRun) -> dict[str, Any]:
    conftest = tc.path / "conftest.py"
    conftest.write_text(conftest.read_text() + DEVICE_AND_FINGERPRINT)
    tc.matrix(MATRIX)
    tc.verdicts({"sm90-bf16-256x128x64-c1x1x1-none": {"stage": "initialize", "smem": 240000}})
    tc.run("--tile-report", "r.json").assert_outcomes(passed=1, failed=1, skipped=2)
    document: dict[str, Any] = json.loads((tc.path / "r.json").read_text())
    return document


def test_a_tile_report_validates_against_the_schema(tc: TileRun, schema: dict[str, Any]) -> None:
    document = _run(tc)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema_errors(document, schema, schema) == []
    assert document["format"] == FORMAT
    by_id = {c["id"]: c for c in document["cases"]}
    assert by_id["sm90-bf16-256x128x64-c1x1x1-none"]["verdict"]["device"] == {
        "kind": "hardware",
        "name": "NVIDIA H200",
        "arch": "sm90",
        "cc": "9.0",
    }
    assert by_id["sm90-bf16-128x64x64-c1x1x1-none"]["verdict"]["device"] is None  # the fake says none
    assert "skip_reason" in by_id["sm100-bf16-128x64x64-c1x1x1-none"]
    assert "worker" not in by_id["sm100-bf16-128x64x64-c1x1x1-none"]  # written only under xdist


def test_the_validator_is_not_vacuous(schema: dict[str, Any]) -> None:
    document = read_results(report("sm120-virtual")).to_json()  # upgraded
    assert document["format"] == FORMAT
    document["cases"][0]["verdict"]["outcome"] = "weird"
    document["cases"][1]["case"]["tile"] = "128x128"
    del document["cases"][2]["id"]
    document["cases"][3]["surprise"] = 1
    errors = schema_errors(document, schema, schema)
    assert any("cases[0].verdict.outcome" in e for e in errors)
    assert any("cases[1].case.tile" in e for e in errors)
    assert "$.cases[2]: missing 'id'" in errors
    assert "$.cases[3]: unknown key 'surprise'" in errors


def test_backends_add_to_the_host_fingerprint(tc: TileRun) -> None:
    fingerprint = _run(tc)["host"]["fingerprint"]
    # the core's fields first, then the backends' (FlashInfer's nvcc is a field of its own)
    assert list(fingerprint)[:4] == ["gpus", "driver", "cuda_driver", "tileconform"]
    assert fingerprint["fakebackend"] == "1.2"
    # the FlashInfer plugin's version (a field of its own) is not erased by another plugin's None
    assert fingerprint.get("flashinfer") == _installed("flashinfer-python")


def _installed(name: str) -> str | None:
    import importlib.metadata

    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: str(p.relative_to(REPO)))
def test_shipped_format_1_files_read_and_upgrade(path: Path, schema: dict[str, Any]) -> None:
    document = read_results(path)
    upgraded = document.to_json()
    assert upgraded["format"] == FORMAT
    assert schema_errors(upgraded, schema, schema) == []
    assert all(v.device is not None for _, v in document.judged())
    assert parse_results(json.loads(dumps(document))) == document  # what is written reads back the same


def _format_1(source: str, device: Any = "absent") -> dict[str, Any]:
    verdict: dict[str, Any] = {
        "failed_stage": None,
        "judged_through": "launch",
        "source": source,
        "outcome": "pass",
    }
    if device != "absent":
        verdict["device"] = device
    case = {"arch": "sm90", "act": "bf16", "weight": "bf16", "out": "bf16", "tile": "128x64x64"}
    return {"format": 1, "cases": [{"id": "c", "case": case, "verdict": verdict}]}


@pytest.mark.parametrize(
    ("source", "device"),
    [
        ("hardware (NVIDIA H200, CC 9.0)", Device("hardware", "NVIDIA H200", "sm90", "9.0")),
        (
            "hardware (NVIDIA RTX PRO 6000, CC 12.0)",
            Device("hardware", "NVIDIA RTX PRO 6000", "sm120", "12.0"),
        ),
        ("virtual (sm120 profile)", Device("virtual", "virtual sm120", "sm120", "12.0")),
        ("virtual (sm103 profile)", Device("virtual", "virtual sm103", "sm103", "10.3")),
        ("nvcc (flashinfer 0.7.4)", Device("build", "nvcc")),
        ("codegen (flashinfer 0.6.0)", Device("build", "codegen")),
        ("compile only", Device("build", "compile only")),
        ("fake", Device("build", "fake")),
    ],
)
def test_format_1_device_comes_from_its_source_once(source: str, device: Device) -> None:
    for recorded in ("absent", None):  # written before Verdict.device existed, or just after
        (entry,) = parse_results(_format_1(source, recorded)).cases
        assert entry.verdict is not None
        assert entry.verdict.to_verdict().device == device


def test_a_recorded_device_is_kept() -> None:
    device = {"kind": "virtual", "name": "virtual sm90", "arch": "sm90", "cc": "9.0"}
    (entry,) = parse_results(_format_1("hardware (X, CC 1.0)", device)).cases
    assert entry.verdict is not None and entry.verdict.device is not None
    assert entry.verdict.device.name == "virtual sm90"


def test_format_2_source_text_is_not_read_back() -> None:
    """In the current format the device is what the verdict says, whatever its source text."""
    data = _format_1("hardware (NVIDIA H200, CC 9.0)", None)
    data["format"] = 2
    document = parse_results(data)
    ((_, verdict),) = document.judged()
    assert verdict.device is None
    assert device_key(verdict, document.host).kind == "build"


def test_written_and_read_back(tmp_path: Path) -> None:
    verdict = Verdict(
        Stage.INITIALIZE,
        Stage.NUMERICS,
        source="hardware (NVIDIA H200, CC 9.0)",
        status="Error Internal",
        smem_requested=240000,
        smem_limit=232448,
        extra={"kernel_ms": 0.01},
        device=Device("hardware", "NVIDIA H200", "sm90", "9.0"),
    )
    document = ResultsDocument.model_validate(
        {
            "format": FORMAT,
            "cases": [{"id": "c", "case": None, "verdict": verdict.to_json(), "outcome": "failed"}],
        }
    )
    path = tmp_path / "deep" / "r.json"
    write_results(path, document)
    assert read_results(path) == document
    (entry,) = read_results(path).cases
    assert entry.verdict is not None and entry.verdict.to_verdict() == verdict
    assert sorted(p.name for p in path.parent.iterdir()) == ["r.json"]  # no temporary file left


def test_the_model_mirrors_the_verdict() -> None:
    verdict_fields = [f.name for f in dataclasses.fields(Verdict)]
    assert list(VerdictRecord.model_fields) == [*verdict_fields, "outcome", "kernel_ran"]
    assert typing.get_args(Outcome) == EXPECTATIONS


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (
            '{"format": 2, "cases": [{"id": "x", "case": null, "extra": 1}]}',
            "t.json: cases[0]: unknown key 'extra'",
        ),
        (
            '{"format": 2, "cases": [{"id": "x", "case": {"arch": "sm90", "act": "bf16", "weight": "bf16", '
            '"out": "bf16", "tile": "128x64"}}]}',
            "t.json: cases[0].case.tile: String should match pattern",
        ),
        ('{"format": 2, "host": [], "cases": []}', "t.json: host: Input should be a valid dictionary"),
        (
            '{"format": 2, "cases": [{"id": "x", "case": null, "verdict": {"outcome": "pass", "source": "s", '
            '"judged_through": "launch", "device": {"kind": "cloud", "name": "n"}}}]}',
            "t.json: cases[0].verdict.device.kind: unknown kind 'cloud'",
        ),
    ],
)
def test_bad_files_say_where(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, message: str
) -> None:
    (tmp_path / "t.json").write_text(content)
    assert main(["report", "merge", str(tmp_path / "t.json")]) == 2
    captured = capsys.readouterr()
    assert message in captured.err and "Traceback" not in captured.err
    assert captured.out == ""


def test_many_problems_are_cut_short() -> None:
    data = {"format": 2, "cases": [{"id": str(i)} for i in range(10)]}
    with pytest.raises(ReportError) as info:
        parse_results(data, "t.json")
    lines = str(info.value).splitlines()
    assert lines[0] == "t.json: cases[0]: missing 'case'"
    assert lines[-1] == "t.json: and 7 more problem(s)"


def test_gzipped_and_unreadable_files(tmp_path: Path) -> None:
    source = report("sm120-virtual")
    plain, packed = tmp_path / "r.json", tmp_path / "r.json.gz"
    plain.write_bytes(gzip.decompress(source.read_bytes()))
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    assert read_results(packed) == read_results(plain) == read_results(source)
    (tmp_path / "bad.json.gz").write_text("not gzip")
    with pytest.raises(ReportError, match=r"bad\.json\.gz: cannot read"):
        read_results(tmp_path / "bad.json.gz")
    (tmp_path / "latin.json").write_bytes(b'{"format": 1, "cases": [], "created": "\xe9"}')
    with pytest.raises(ReportError, match=r"latin\.json: not UTF-8 text"):
        read_results(tmp_path / "latin.json")


def test_the_core_imports_no_backend() -> None:
    """The results file, its fingerprint and the recorder work without any backend imported."""
    code = (
        "import sys\n"
        "import pytest_tileconform.core.recorder, pytest_tileconform.results.merge\n"
        "import pytest_tileconform.results.compare, pytest_tileconform.results.store\n"
        "from pytest_tileconform.results.fingerprint import host_fingerprint\n"
        "host_fingerprint()\n"
        "print(sorted(m for m in sys.modules if m.startswith(('pytest_tileconform.flashinfer', "
        "'pytest_tileconform.virtual'))))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
