"""FlashInfer's own route to a first SM90 MoE tactic: JIT-building its whole ``fused_moe_90``
module. Too long to build whole inside one device call, so this measures the compile time of a
random sample of the module's generated files, with FlashInfer's own flags, and extrapolates.

    # where flashinfer-python is installed: write the sample (files + manifest)
    python benchmarks/flashinfer_route.py prepare OUT --arch 90 --sample 3 --seed 0
    # on the build host (FlashInfer's sources unpacked at DATA): compile the sample in parallel
    python benchmarks/flashinfer_route.py compile OUT --sources DATA > OUT/result.json

The extrapolation counts only the generated instantiation files (the module also compiles
about 20 hand-written sources: its dispatch files and bindings), so it is a lower bound.
"""

from __future__ import annotations

import argparse
import json
import random
import shlex
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from pytest_tileconform.flashinfer.configs import KernelConfig
from pytest_tileconform.flashinfer.generator import load_generator
from pytest_tileconform.flashinfer.nvcc_flags import nvcc_command
from pytest_tileconform.flashinfer.sources import find_sources


def _instantiations(text: str) -> int:
    """Launcher instantiations in a generated file: the TMA WS macro or an explicit one."""
    return text.count("INSTANTIATE_TMA_WARP_SPECIALIZED_MOE_GEMM(") + text.count("\ntemplate void ")


def prepare(out: Path, arch: int, sample: int, seed: int) -> None:
    sources = find_sources(None)
    generator = load_generator(sources)
    with tempfile.TemporaryDirectory() as tmp:
        generator.generate_gemm_operations(tmp, f"{arch};{arch}-real")
        files = sorted(Path(tmp).rglob("*.generated.cu"))
        chosen = random.Random(seed).sample(files, min(sample, len(files)))
        out.mkdir(parents=True, exist_ok=True)
        for f in chosen:
            (out / f.name).write_text(f.read_text())
        instantiations = sum(_instantiations(f.read_text()) for f in files)
    manifest = {
        "flashinfer": sources.version,
        "arch": arch,
        "generated_files": len(files),
        "instantiations_in_module": instantiations,
        "instantiations_in_sample": sum(_instantiations((out / f.name).read_text()) for f in chosen),
        "sample": [f.name for f in chosen],
        "seed": seed,
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1))
    print(json.dumps(manifest, indent=1))


def _compile(command: list[str]) -> dict[str, object]:
    timer = ["/usr/bin/time", "-f", "%M"] if Path("/usr/bin/time").exists() else []
    started = time.monotonic()
    proc = subprocess.run([*timer, *command], capture_output=True, text=True, check=False)
    lines = proc.stderr.strip().splitlines()
    peak_kb = lines[-1] if timer and lines else ""
    return {
        "seconds": round(time.monotonic() - started, 1),
        "ok": proc.returncode == 0,
        "peak_rss_gb": round(int(peak_kb) / 1e6, 2) if peak_kb.isdigit() else None,
        "first_error": "" if proc.returncode == 0 else (lines[:1] or [""])[0][:300],
    }


def compile_sample(out: Path, data: Path) -> None:
    manifest = json.loads((out / "manifest.json").read_text())
    sources = find_sources(data)
    # FlashInfer's module flags for the arch, as the harness uses them (codegen mirrors them and
    # tests that it does); the harness's own include dir and sources are dropped
    config = KernelConfig(manifest["arch"], "bf16", "bf16", "bf16", (128, 128, 64), (1, 1, 1), False, "none")
    full = nvcc_command(config, sources, Path("SRC"), Path("OUT"))
    flags = [a for a in full[: full.index("--cudart=static")] if "harness" not in a]
    commands = [
        [*flags, "-c", str(out / name), "-o", str(out / (name + ".o"))] for name in manifest["sample"]
    ]
    started = time.monotonic()
    with ThreadPoolExecutor(len(commands)) as pool:
        results = list(pool.map(_compile, commands))
    wall = time.monotonic() - started
    per_file = [r["seconds"] for r in results]
    mean = sum(per_file) / len(per_file)  # type: ignore[arg-type]
    report = {
        **manifest,
        "command": shlex.join(commands[0]),
        "files": dict(zip(manifest["sample"], results, strict=True)),
        "sample_wall_s": round(wall, 1),
        "mean_file_s": round(mean, 1),
        "extrapolated_module_s_on_16_cores": round(mean * manifest["generated_files"] / 16, 0),
        "note": "generated files only, compiled side by side; the module's ~20 other sources excluded",
    }
    print(json.dumps(report, indent=1))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("out", type=Path)
    p.add_argument("--arch", type=int, default=90)
    p.add_argument("--sample", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    c = sub.add_parser("compile")
    c.add_argument("out", type=Path)
    c.add_argument("--sources", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.command == "prepare":
        prepare(args.out, args.arch, args.sample, args.seed)
    else:
        compile_sample(args.out, args.sources)
    return 0


if __name__ == "__main__":
    sys.exit(main())
