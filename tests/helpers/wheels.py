"""Tiny fake FlashInfer wheels (no network): the members a release keeps (``KEPT``), some it drops,
and a wheel made of them."""

from __future__ import annotations

import zipfile
from pathlib import Path

from pytest_tileconform.flashinfer.compat import HARNESS_MACRO_PARAMS, MACRO
from pytest_tileconform.flashinfer.sources import LAUNCHER_INL

NV = "flashinfer/data/csrc/nv_internal"
MACRO_17 = f"#define {MACRO}({', '.join(HARNESS_MACRO_PARAMS)})"
KEPT = {
    f"{NV}/{LAUNCHER_INL}": f"namespace cutlass_kernels_oss {{\n{MACRO_17}\n}}\n",
    f"{NV}/cpp/common/logger.cpp": "// logger\n",
    f"{NV}/cpp/common/stringUtils.cpp": "// strings\n",
    f"{NV}/cpp/common/tllmException.cpp": "// exceptions\n",
    "flashinfer/data/cutlass/include/cutlass/cutlass.h": "// cutlass\n",
    "flashinfer/data/cutlass/tools/util/include/cutlass/util/packed_stride.hpp": "// util\n",
    "flashinfer/data/include/flashinfer/x.cuh": "// fi\n",
    "flashinfer/data/spdlog/include/spdlog/spdlog.h": "// spdlog\n",
    "flashinfer/jit/gemm/cutlass/generate_kernels.py": "# gen\n",
    "flashinfer/jit/fused_moe.py": "# flags\n",
    "flashinfer/compilation_context.py": "# ctx\n",
}
DROPPED = {
    "flashinfer/__init__.py": "import torch\n",
    "flashinfer/data/csrc/xqa/kernel.cu": "// not needed\n",
    "flashinfer/data/cutlass/python/setup.py": "# not needed\n",
    "flashinfer/data/include/../../../../escape.txt": "outside\n",
}


def make_wheel(
    directory: Path,
    version: str = "0.6.0",
    name: str = "flashinfer-python",
    files: dict[str, str] | None = None,
) -> Path:
    wheel = directory / f"flashinfer_python-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for member, text in (files if files is not None else {**KEPT, **DROPPED}).items():
            zf.writestr(member, text)
        zf.writestr(
            f"flashinfer_python-{version}.dist-info/METADATA",
            f"Metadata-Version: 2.4\nName: {name}\nVersion: {version}\n\nLong description\nVersion: 9\n",
        )
    return wheel
