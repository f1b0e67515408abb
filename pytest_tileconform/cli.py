"""``tileconform`` (also ``python -m pytest_tileconform``): commands around tile matrices and results.

Data goes to stdout (or to ``-o FILE``, written atomically), messages to stderr. Exit status:
0 success, 1 the command worked and found what it was asked to flag (``drift --strict``),
2 bad usage or unreadable input, 3 a needed tool or FlashInfer itself is missing or failed.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

EXIT_OK = 0
EXIT_FLAGGED = 1
EXIT_USAGE = 2
EXIT_ENVIRONMENT = 3


class CommandError(Exception):
    """A failure to report on stderr as ``tileconform: message``, with an exit status."""

    def __init__(self, message: str, status: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.status = status


def emit(text: str, output: Path | None) -> None:
    """Write data to ``output`` atomically, or to stdout."""
    if output is None:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        sys.stdout.flush()
        return
    from .update import write_atomic

    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(output, text if text.endswith("\n") else text + "\n")
    except OSError as exc:
        raise CommandError(f"cannot write {output}: {exc.strerror or exc}") from None
    message(f"wrote {output}")


def message(text: str) -> None:
    print(f"tileconform: {text}", file=sys.stderr, flush=True)


# -- report merge ------------------------------------------------------------------------------
def _report_merge(args: argparse.Namespace) -> int:
    from .merge import ReportError, merge, to_html, to_markdown

    try:
        merged = merge(args.results)
    except ReportError as exc:
        raise CommandError(str(exc)) from None
    for warning in merged.warnings:
        message(f"warning: {warning}")
    if not merged.devices:
        message("warning: no case in these files has a verdict")
    if args.html is not None:
        emit(to_html(merged), args.html)
    if args.html is None or args.output is not None:
        emit(to_markdown(merged), args.output)
    return EXIT_OK


def _add_report(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    report = subparsers.add_parser(
        "report",
        help="work with --tile-report results files",
        description="Work with --tile-report results files.",
    )
    actions = report.add_subparsers(dest="action", metavar="ACTION", required=True)
    merge = actions.add_parser(
        "merge",
        help="merge results files into one compatibility table (Markdown and/or HTML)",
        description="Merge --tile-report results files from several runners, architectures and "
        "shards into one compatibility table: one row per device fingerprint (GPU or virtual "
        "profile, compute capability, opt-in shared memory, driver, CUDA, FlashInfer, nvcc), one "
        "table per architecture and dtypes, one column per CTA tile. Markdown goes to stdout "
        "unless -o is given; --html writes a self-contained HTML page (then Markdown is written "
        "only if -o is given too).",
    )
    merge.add_argument("results", nargs="+", type=Path, metavar="RESULTS.json", help="--tile-report files")
    merge.add_argument("-o", "--output", type=Path, default=None, metavar="FILE", help="write Markdown here")
    merge.add_argument("--html", type=Path, default=None, metavar="FILE", help="write an HTML page here")
    merge.set_defaults(handler=_report_merge)


# -- gen-matrix --------------------------------------------------------------------------------
def _sources(override: Path | None) -> object:
    from .flashinfer.sources import FlashInferSourcesError, find_sources

    try:
        return find_sources(override)
    except FlashInferSourcesError as exc:
        raise CommandError(str(exc), EXIT_ENVIRONMENT) from None


def _split_list(values: Sequence[str]) -> list[str]:
    return [v.strip() for value in values for v in value.split(",") if v.strip()]


def _gen_matrix(args: argparse.Namespace) -> int:
    from .flashinfer.generator import GENERATOR_ARCH, GeneratorError, generator_path, instantiated_configs
    from .flashinfer.sources import FlashInferSources
    from .genmatrix import GenMatrixError, check_text, matrix_text, select_dtypes

    if not args.from_flashinfer:
        raise CommandError("gen-matrix needs --from-flashinfer (the only source of configurations so far)")
    arch = args.arch.lower()
    if arch not in GENERATOR_ARCH:
        raise CommandError(f"--arch {args.arch}: choose one of {', '.join(GENERATOR_ARCH)}")
    sources = _sources(args.flashinfer_sources)
    assert isinstance(sources, FlashInferSources)
    try:
        configs, skipped = instantiated_configs(sources, arch)
        configs = select_dtypes(configs, _split_list(args.dtype))
    except GeneratorError as exc:
        raise CommandError(str(exc), EXIT_ENVIRONMENT) from None
    except GenMatrixError as exc:
        raise CommandError(str(exc)) from None
    for item in skipped:
        if args.verbose:
            message(f"left out: {item.description}: {item.reason}")
    if skipped:
        reasons = sorted({s.reason for s in skipped})
        message(
            f"{len(skipped)} generator operation(s) for {arch} are not built by this harness and are "
            f"left out ({'; '.join(reasons)}); -v lists them"
        )
    command = "tileconform gen-matrix --from-flashinfer --arch " + arch
    if args.dtype:
        command += " --dtype " + ",".join(_split_list(args.dtype))
    try:
        text = matrix_text(
            configs,
            arch,
            flashinfer_version=sources.version,
            generator=generator_path(sources),
            skipped=skipped,
            command=command,
        )
    except GenMatrixError as exc:
        raise CommandError(str(exc)) from None
    check_text(text, configs, arch, args.output or Path(f"{arch}-generated.yaml"))
    message(f"{len(configs)} configuration(s) of FlashInfer {sources.version} for {arch}")
    emit(text, args.output)
    return EXIT_OK


def _add_gen_matrix(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    gen = subparsers.add_parser(
        "gen-matrix",
        help="write a matrix of the configurations the installed FlashInfer instantiates",
        description="Write a tile matrix (format version 1) of exactly the MoE grouped-GEMM "
        "configurations FlashInfer's generator (jit/gemm/cutlass/generate_kernels.py, loaded on "
        "its own, without importing flashinfer) instantiates for an architecture and that this "
        "harness builds. It has no expectations: run it with --tile-update to record them.",
    )
    gen.add_argument(
        "--from-flashinfer", action="store_true", help="take the configurations from FlashInfer's generator"
    )
    gen.add_argument("--arch", required=True, help="sm90, sm100, sm103, sm120 or sm121")
    gen.add_argument(
        "--dtype",
        action="append",
        default=[],
        metavar="DTYPES",
        help="only these dtype combinations, as case ids spell them (nvfp4-bf16, fp8_e4m3-fp16, "
        "bf16) or by activation (nvfp4); comma-separated or repeated",
    )
    gen.add_argument("-o", "--output", type=Path, default=None, metavar="FILE", help="write the matrix here")
    gen.add_argument(
        "--flashinfer-sources",
        type=Path,
        default=None,
        metavar="DIR",
        help="FlashInfer's data directory (default: the installed flashinfer-python)",
    )
    gen.add_argument("-v", "--verbose", action="store_true", help="list the operations left out")
    gen.set_defaults(handler=_gen_matrix)


# -- parser ------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tileconform",
        description="Tile matrices that follow FlashInfer, and what the results of "
        "pytest --tile-matrix say across runners.",
        epilog="Exit status: 0 ok, 1 flagged (drift --strict), 2 bad usage or input, "
        "3 a needed tool or FlashInfer is missing or failed.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for add in _COMMANDS:
        add(subparsers)
    return parser


_COMMANDS: list[Callable[[argparse._SubParsersAction[argparse.ArgumentParser]], None]] = [
    _add_gen_matrix,
    _add_report,
]


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Callable[[argparse.Namespace], int] = args.handler
    try:
        return handler(args)
    except CommandError as exc:
        message(str(exc))
        return exc.status
    except KeyboardInterrupt:
        message("interrupted")
        return 130
    except BrokenPipeError:
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
