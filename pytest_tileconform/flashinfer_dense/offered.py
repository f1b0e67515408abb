"""Which dense CUTLASS GEMM configurations FlashInfer instantiates and which tactics it offers.

Read from FlashInfer's own sources, never typed here, because the bugs this backend is for
(FlashInfer #3568: SM120 MXFP8 tactics asking 111,616 B of 101,376) live exactly in those lists:

- the JIT generator ``flashinfer/jit/gemm/core.py``: each ``gen_gemm_smNNN_module_cutlass_FAMILY``
  renders one translation unit per ``dtype_list`` x ``*cta_m_n_k_list`` entry (what gets compiled),
  for the ``supported_major_versions`` it passes, into the JIT module named by ``gen_jit_spec``;
- the runner header its binding ``csrc/<module>.cu`` includes: ``getConfigs()`` builds the list
  whose index is the autotuner's tactic id (``get_valid_tactics`` returns
  ``range(<family>_tactic_num())`` and the binding picks ``getConfigs()[tactic]``), and the
  dispatch ``switch`` maps each tile enum to the CTA shape it instantiates.

The file is parsed (``ast`` for the generator, a small reader of the two C++ shapes FlashInfer
0.7.4 uses), not imported: importing ``flashinfer`` loads CUDA and torch. Shared memory per tactic
is not here: CUTLASS derives the stage count and the ``SharedStorage`` size from the collective's
types, which only the compiler evaluates; that is the harness's job.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ..flashinfer.pysource import parse_file
from ..flashinfer.sources import FlashInferSources

#: the JIT generator of FlashInfer's GEMM modules, relative to the package directory
GENERATOR = Path("jit") / "gemm" / "core.py"
_GENERATOR_FUNCTION = re.compile(r"gen_gemm_(sm\d+)_module_cutlass_(\w+)")

Shape = tuple[int, int, int]


class DenseSourcesError(RuntimeError):
    """FlashInfer's dense GEMM generator or runners are missing or not in a shape read here."""


@dataclass(frozen=True)
class Tactic:
    """One entry of a runner's ``getConfigs()``: what autotuner tactic ``index`` runs."""

    index: int
    tile: str  # the tile enum, e.g. CtaShape128x128x128B
    ctas: tuple[Shape, ...]  # every CTA shape its dispatch may instantiate, the native one last
    cluster: Shape
    swap_ab: bool
    stream_k: bool

    @property
    def cta(self) -> Shape:
        """The shape the dispatch's unconditional switch instantiates (see :func:`_dispatch`)."""
        return self.ctas[-1]

    @property
    def name(self) -> str:
        cta = "x".join(map(str, self.cta))
        cluster = "x".join(map(str, self.cluster))
        flags = "".join(f"_{f}" for f, on in (("swapab", self.swap_ab), ("streamk", self.stream_k)) if on)
        return f"t{self.index}_{cta}_c{cluster}{flags}"


@dataclass(frozen=True)
class Family:
    """One JIT module of a dense CUTLASS GEMM family for one architecture."""

    module: str  # gen_jit_spec's name, e.g. mxfp8_gemm_cutlass_sm120
    arch: str  # from the generator function's name, e.g. sm120
    kind: str  # fp4, mxfp8, fp8, bf16
    majors: tuple[int, ...]  # supported_major_versions of its nvcc flags
    out_dtypes: tuple[str, ...]  # dtype_list: the output types rendered
    instantiated: tuple[Shape, ...]  # CTA shapes rendered, in the generator's order
    runner: Path  # the header whose getConfigs() is the tactic list
    tactics: tuple[Tactic, ...]

    def uninstantiated(self) -> tuple[Tactic, ...]:
        """Offered tactics with a CTA shape the generator never renders (they could not link)."""
        return tuple(t for t in self.tactics if not set(t.ctas) <= set(self.instantiated))


@dataclass(frozen=True)
class Offered:
    families: tuple[Family, ...]
    #: generator functions of the pattern that are not read, with why (e.g. svdquant's named configs)
    unread: dict[str, str]

    def family(self, module: str) -> Family:
        for family in self.families:
            if family.module == module:
                return family
        raise KeyError(f"no dense GEMM module {module!r}; read: {[f.module for f in self.families]}")


def read_offered(sources: FlashInferSources) -> Offered:
    """Every ``gen_gemm_smNNN_module_cutlass_*`` of the generator beside ``sources``."""
    generator = sources.root.parent / GENERATOR
    if not generator.is_file():
        raise DenseSourcesError(
            f"FlashInfer's GEMM generator {generator} is missing: the dense tactics are read from the "
            f"installed flashinfer package, not from a bare data/ directory ({sources.root})"
        )
    tree = parse_file(generator)
    families: list[Family] = []
    unread: dict[str, str] = {}
    for function in tree.body:
        if not isinstance(function, ast.FunctionDef):
            continue
        match = _GENERATOR_FUNCTION.fullmatch(function.name)
        if match is None:
            continue
        spec = _read_generator_function(function, generator)
        if isinstance(spec, str):
            unread[function.name] = spec
            continue
        module, majors, out_dtypes, instantiated, binding = spec
        runner, tactics = _read_runner(sources, binding)
        families.append(Family(module, match[1], match[2], majors, out_dtypes, instantiated, runner, tactics))
    if not families:
        raise DenseSourcesError(f"{generator}: no gen_gemm_smNNN_module_cutlass_* function read")
    return Offered(tuple(families), unread)


_GeneratorSpec = tuple[str, tuple[int, ...], tuple[str, ...], tuple[Shape, ...], str]


def _read_generator_function(function: ast.FunctionDef, path: Path) -> _GeneratorSpec | str:
    """(module, majors, out dtypes, CTA shapes, binding .cu) of one generator, or why not."""
    where = f"{path}:{function.lineno} {function.name}"
    dtypes: tuple[str, ...] = ()
    shapes: list[Shape] = []
    bindings: list[str] = []
    for node in ast.walk(function):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            target = node.targets[0].id
            if target == "dtype_list":
                dtypes = tuple(ast.literal_eval(node.value))
            elif target.endswith("cta_m_n_k_list"):
                shapes += [s for s in map(tuple, ast.literal_eval(node.value)) if s not in shapes]
            elif target == "source_paths":
                bindings += [
                    n.value
                    for n in ast.walk(node.value)
                    if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.endswith(".cu")
                ]
    if not shapes:
        return "renders no cta_m_n_k_list (its configurations are named, not shaped)"
    module = majors = None
    for node in ast.walk(function):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "gen_jit_spec":
            first = node.args[0] if node.args else None
            module = first.value if isinstance(first, ast.Constant) else None
        if isinstance(node, ast.Call):
            for keyword in node.keywords:
                if keyword.arg == "supported_major_versions":
                    majors = tuple(ast.literal_eval(keyword.value))
    if module is None or majors is None or len(bindings) != 1 or not dtypes:
        raise DenseSourcesError(
            f"{where}: expected one gen_jit_spec name, supported_major_versions, one binding .cu "
            f"and a dtype_list; found {module!r}, {majors!r}, {bindings!r}, {dtypes!r}"
        )
    return str(module), majors, dtypes, tuple(shapes), bindings[0]


_INCLUDE = re.compile(r'#include\s+"(flashinfer/gemm/[\w./]+\.h)"')
_GET_CONFIGS = re.compile(r"getConfigs\(\)\s*const\s*(?:override\s*)?\{")
_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)


def _read_runner(sources: FlashInferSources, binding: str) -> tuple[Path, tuple[Tactic, ...]]:
    """The runner header the binding includes that defines ``getConfigs()``, and its tactics."""
    binding_path = sources.csrc / binding
    if not binding_path.is_file():
        raise DenseSourcesError(f"the generator's binding {binding_path} is missing")
    for include in _INCLUDE.findall(binding_path.read_text()):
        header = sources.root / "include" / include
        text = _COMMENT.sub("", header.read_text()) if header.is_file() else ""
        body = _braced(text, _GET_CONFIGS)
        if body is not None:
            return header, _tactics(body, _dispatch(text), header)
    raise DenseSourcesError(f"no header included by {binding_path} defines getConfigs() const {{...}}")


def _braced(text: str, opening: re.Pattern[str]) -> str | None:
    """The text inside the braces that ``opening`` (ending in ``{``) opens."""
    match = opening.search(text)
    if match is None:
        return None
    depth, start = 1, match.end()
    for i in range(start, len(text)):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            return text[start:i]
    return None


_CASE = re.compile(r"case\s+CutlassTileConfigSM\d+::(\w+)\s*:")
_CUTE_SHAPE = re.compile(r"cute::Int<(\d+)>\s*,\s*cute::Int<(\d+)>\s*,\s*cute::Int<(\d+)>")
#: DISPATCH_WITH_SCHEDULER(128, 32, 128) or dispatchGemmClusterShapeSm100<T, arch, 64, 64, 128>
_PLAIN_SHAPE = re.compile(r"\b(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\b")


def _dispatch(text: str) -> dict[str, tuple[Shape, ...]]:
    """Tile enum -> every CTA shape a ``switch`` case instantiates for it, in source order.

    Cases that fall through take the shape of the body they fall into. A runner may switch twice:
    SM103's fp4 runner first routes K768 tiles to a K256 shape when the output is not aligned for
    256-bit stores, then switches on the tile unconditionally; the last shape is that native one.
    """
    cases = list(_CASE.finditer(text))
    shapes: dict[str, tuple[Shape, ...]] = {}
    falling: list[str] = []
    for case, following in zip(cases, [*cases[1:], None], strict=True):
        segment = text[case.end() : following.start() if following else len(text)]
        found = _CUTE_SHAPE.search(segment) or _PLAIN_SHAPE.search(segment)
        falling.append(case[1])
        if found is None and segment.strip():
            falling = []  # a body without a shape (a throw, a break): these tiles instantiate nothing here
        elif found is not None:
            shape = (int(found[1]), int(found[2]), int(found[3]))
            for tile in falling:
                shapes[tile] = (*shapes.get(tile, ()), shape)
            falling = []
    return shapes


_TILES = re.compile(r"std::vector<CutlassTileConfigSM\d+>\s+\w+\s*=\s*\{([^}]*)\}")
_CLUSTERS = re.compile(r"std::vector<ClusterShape>\s+(\w+)\s*=\s*\{([^}]*)\}")
_CLUSTER_VALUE = re.compile(r"ClusterShape\s+(\w+)\s*=\s*ClusterShape::(\w+)")
_CONSTRUCTION = re.compile(r"CutlassGemmConfig\s+\w+\s*\(|CutlassGemmConfig\s*\(|emplace_back\s*\(")
_BEST = re.compile(r"best_tactics_index\s*=\s*\{([\d\s,]*)\}")


def _tactics(body: str, dispatch: dict[str, tuple[Shape, ...]], header: Path) -> tuple[Tactic, ...]:
    """Mirror ``getConfigs()``: for each tile, each cluster shape, each construction in order;
    then the ``best_tactics_index`` entries first, the rest after, as the runner reorders."""
    tiles = re.findall(r"::(\w+)", "".join(_TILES.findall(body)))
    constructions = [_arguments(body, m.end()) for m in _CONSTRUCTION.finditer(body)]
    if not tiles or not constructions:
        raise DenseSourcesError(f"{header}: getConfigs() has no tile list or no CutlassGemmConfig built")
    vectors = {name: re.findall(r"ClusterShape::(\w+)", values) for name, values in _CLUSTERS.findall(body)}
    scalars = dict(_CLUSTER_VALUE.findall(body))
    missing = [tile for tile in tiles if tile not in dispatch]
    if missing:
        raise DenseSourcesError(f"{header}: tiles {missing} offered but no dispatch case instantiates them")
    configs: list[tuple[str, tuple[Shape, ...], Shape, bool, bool]] = []
    for tile in tiles:
        for cluster_names in _cluster_choices(constructions, vectors, scalars, header):
            for args, cluster in zip(constructions, cluster_names, strict=True):
                flags = [a == "true" for a in args[4:6]] + [False, False]
                configs.append((tile, dispatch[tile], _cluster_shape(cluster), flags[0], flags[1]))
    best = _BEST.search(body)
    if best:
        first = [int(i) for i in best[1].split(",") if i.strip() and 0 <= int(i) < len(configs)]
        configs = [configs[i] for i in first] + [c for i, c in enumerate(configs) if i not in first]
    return tuple(Tactic(i, *config) for i, config in enumerate(configs))


def _cluster_choices(
    constructions: list[list[str]], vectors: dict[str, list[str]], scalars: dict[str, str], header: Path
) -> Iterator[list[str]]:
    """Per iteration of the cluster loop (or once, without one), each construction's cluster shape
    name: a ``ClusterShape::`` literal, a scalar set once, else the loop's variable."""
    looped = list(vectors.values())
    if len(looped) > 1:
        raise DenseSourcesError(f"{header}: getConfigs() loops over {len(looped)} cluster lists")
    for cluster in looped[0] if looped else [None]:
        names = []
        for args in constructions:
            argument = args[3] if len(args) > 3 else ""
            if argument.startswith("ClusterShape::"):
                names.append(argument.removeprefix("ClusterShape::"))
            elif argument in scalars:
                names.append(scalars[argument])
            elif cluster is not None:
                names.append(cluster)
            else:
                raise DenseSourcesError(f"{header}: cluster argument {argument!r} of getConfigs() unresolved")
        yield names


def _arguments(text: str, start: int) -> list[str]:
    """The top-level comma-separated arguments of the call whose ``(`` ends just before ``start``."""
    depth, current, args = 1, "", []
    for char in text[start:]:
        if char in "(<{":
            depth += 1
        elif char in ")>}":
            depth -= 1
            if depth == 0:
                break
        if char == "," and depth == 1:
            args.append(current.strip())
            current = ""
        else:
            current += char
    return [*args, current.strip()]


def _cluster_shape(name: str) -> Shape:
    match = re.fullmatch(r"ClusterShape_(\d+)x(\d+)x(\d+)", name)
    if match is None:
        raise DenseSourcesError(f"cluster shape {name!r} is not ClusterShape_MxNxK")
    return int(match[1]), int(match[2]), int(match[3])
