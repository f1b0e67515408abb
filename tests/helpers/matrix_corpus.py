"""The hostile-matrix corpus: an id, the file's bytes and the expected outcome, either ``Loads(n)``
or ``Refused(text, where)`` (``where`` is ``"LINE:COL"``, or None where only some position is
promised). Large files are generated, not stored. hostile/test_matrix_corpus.py loads every entry;
hostile/test_matrix_through_pytest.py runs a representative subset the way users do."""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass

from helpers.fake_backend import BASIC
from pytest_tileconform.flashinfer.problem import MAX_DIM, MAX_ELEMENTS
from pytest_tileconform.matrix.bounds import MAX_BYTES, MAX_CASES, MAX_DEPTH, MAX_NODES

#: Seconds any entry may take to load or be refused: a guard against an input that blows up
#: (minutes, or no end), not a speed target; the slowest entries take 5-10 s on two busy cores
#: and about 1 s alone, and collection speed is measured by benchmarks/bench_collection.py.
LIMIT_S = 60.0
POSITION = re.compile(r":(\d+):(\d+): ")
PROBLEM = "problems: {experts: 2, rows: 64, n: 256, k: 128}"
ONE_TILE = BASIC.replace("[128x64x64, 128x128x64, 256x128x64]", "128x64x64")


@dataclass(frozen=True)
class Loads:
    cases: int


@dataclass(frozen=True)
class Refused:
    text: str
    where: str | None = None  # "LINE:COL"


@dataclass(frozen=True)
class Entry:
    id: str
    data: bytes
    expect: Loads | Refused
    max_cases: int = MAX_CASES


CORPUS: list[Entry] = []


def add(id: str, text: str | bytes, expect: Loads | Refused, max_cases: int = MAX_CASES) -> None:
    data = text.encode("utf-8") if isinstance(text, str) else text
    CORPUS.append(Entry(id, data, expect, max_cases))


def problem(value: str) -> str:
    return ONE_TILE.replace(PROBLEM, f"problems: {value}")


# --- valid baselines ----------------------------------------------------------------------
add("basic", BASIC, Loads(3))
add("utf8-bom", codecs.BOM_UTF8 + BASIC.encode(), Loads(3))
add("crlf-newlines", BASIC.replace("\n", "\r\n"), Loads(3))
add("arch-upper-case", BASIC.replace("arch: sm90", "arch: SM90"), Loads(3))
add("names-safe-alphabet", ONE_TILE.replace("  - arch", "  - name: a.b-c_D9\n    arch"), Loads(1))
add("problem-name-safe", problem("{name: p.1-x_Y, experts: 2, rows: 64, n: 256, k: 128}"), Loads(1))
add("hex-int", problem("{experts: 2, rows: 0x40, n: 256, k: 128}"), Loads(1))
add("anchors-small", ONE_TILE.replace("dtype: bf16", "dtype: &d bf16\n    fusion: [none]"), Loads(1))
add("trailing-comment-only", BASIC + "# " + "x" * 10_000 + "\n", Loads(3))
add("rows-at-bound", problem(f"{{rows: [{MAX_DIM}], n: 8, k: 8}}"), Loads(1))
add("experts-at-bound", problem("{experts: 1024, rows: 1, n: 8, k: 8}"), Loads(1))

# --- encodings: where in the file a bad byte is ---------------------------------------------
for name, bom in (
    ("utf16-le", codecs.BOM_UTF16_LE),
    ("utf16-be", codecs.BOM_UTF16_BE),
    ("utf32-le", codecs.BOM_UTF32_LE),
    ("utf32-be", codecs.BOM_UTF32_BE),
):
    encoding = name.replace("utf", "utf_").replace("-", "_")
    add(
        f"{name}-bom",
        bom + BASIC.encode(encoding),
        Refused(
            f"starts with a {name[:6].upper().replace('-', '').replace('UTF', 'UTF-')} byte order mark", "1:1"
        ),
    )
add("utf16-le-no-bom", BASIC.encode("utf_16_le"), Refused("NUL byte at byte offset 1", "1:2"))
add("utf16-be-no-bom", BASIC.encode("utf_16_be"), Refused("NUL byte at byte offset 0", "1:1"))
add(
    "latin1",
    BASIC.replace("fake", "fake").encode() + "# café\n".encode("latin-1"),
    Refused("byte 0xe9", "8:6"),
)
BAD_BYTES = {
    "ff": b"\xff",
    "overlong": b"\xc0\x80",
    "lone-continuation": b"\x80",
    "truncated-3byte": b"\xe2\x82",
    "surrogate": b"\xed\xa0\x80",
    "f5": b"\xf5\x80\x80\x80",
}
BASIC_LINES = BASIC.encode().splitlines(keepends=True)
for bad_name, bad in BAD_BYTES.items():
    for line_no, col in ((1, 1), (2, 10), (4, 9), (7, 16)):
        lines = list(BASIC_LINES)
        line = lines[line_no - 1]
        lines[line_no - 1] = line[: col - 1] + bad + line[col - 1 :]
        offset = sum(len(x) for x in BASIC_LINES[: line_no - 1]) + col - 1
        add(
            f"bad-utf8-{bad_name}-at-{line_no}-{col}",
            b"".join(lines),
            Refused(f"not UTF-8: byte 0x{bad[0]:02x} at byte offset {offset}", f"{line_no}:{col}"),
        )
add("bad-utf8-after-multibyte", "# é\n".encode() + b"# \xff\n" + BASIC.encode(), Refused("not UTF-8", "2:3"))
add("nul-in-middle", BASIC.encode().replace(b"fake", b"fa\0ke"), Refused("NUL byte", "2:12"))
add("control-char", BASIC.replace("fake", "fa\x07ke"), Refused("special characters are not allowed", "2:12"))
add("escape-char", BASIC.replace("fake", "fa\x1bke"), Refused("special characters are not allowed", "2:12"))

# --- size, nodes, depth, aliases -------------------------------------------------------------
add("too-large", BASIC + "#" * MAX_BYTES + "\n", Refused(f"at most {MAX_BYTES:,} bytes", "1:1"))
add("empty-file", "", Refused("a matrix must be a YAML mapping", "1:1"))
add("only-comment", "# nothing\n", Refused("a matrix must be a YAML mapping", "1:1"))
add("only-null", "~\n", Refused("a matrix must be a YAML mapping", "1:1"))
add("scalar", "hello\n", Refused("a matrix must be a YAML mapping", "1:1"))
add("list", "- 1\n- 2\n", Refused("a matrix must be a YAML mapping", "1:1"))
add("two-documents", BASIC + "---\n" + BASIC, Refused("expected a single document", None))
add(
    "many-nodes",
    BASIC + "x: [" + "1," * (MAX_NODES + 10) + "]\n",
    Refused(f"more than {MAX_NODES:,} YAML nodes"),
)
add(
    "many-suites",
    BASIC + "".join(f"  - {{name: s{i}, tile: 64x64x64}}\n" for i in range(MAX_NODES // 4)),
    Refused("YAML nodes"),
)
for depth in (MAX_DEPTH + 1, 100, 1_000, 50_000):
    add(
        f"flow-nesting-{depth}",
        BASIC + "x: " + "[" * depth + "]" * depth + "\n",
        Refused("maximum depth", "8:"),
    )
    add(
        f"flow-map-nesting-{depth}",
        BASIC + "x: " + "{a: " * depth + "1" + "}" * depth + "\n",
        Refused("depth"),
    )
add("flow-nesting-ok-depth", BASIC.replace("arch: sm90", "arch: [[[[sm90]]]]"), Refused("suites.0.arch.0"))
for depth in (MAX_DEPTH + 1, 200):
    add(
        f"block-nesting-{depth}",
        BASIC + "".join("  " * i + f"k{i}:\n" for i in range(depth)) + "  " * depth + "v: 1\n",
        Refused("maximum depth"),
    )


def laughs(levels: int, width: int = 10) -> str:
    """A "billion laughs" file: each level is ``width`` aliases of the one before."""
    lines = ["a0: &a0 [lol]"]
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * width)}]")
    return BASIC + "\n".join(lines) + "\n"


for levels in (6, 9, 20):
    add(f"billion-laughs-{levels}", laughs(levels), Refused("aliases counted as expanded"))
add("laughs-small-but-unknown-key", laughs(3), Refused("unknown key 'a0'", "8:1"))
add(
    "laughs-in-axis",
    "x0: &x [sm90, sm90, sm90, sm90, sm90, sm90, sm90, sm90, sm90, sm90]\n"
    + "".join(f"x{i}: &x{i} [{', '.join(['*x' if i == 1 else f'*x{i - 1}'] * 10)}]\n" for i in range(1, 7))
    + BASIC,
    Refused("YAML nodes"),
)
add(
    "merge-key-bomb",
    BASIC
    + "b0: &b0 {a: 1, b: 2, c: 3, d: 4, e: 5, f: 6, g: 7, h: 8}\n"
    + "".join(
        f"b{i}: &b{i} {{<<: *b{i - 1}, x{i}: [*b{i - 1}, *b{i - 1}, *b{i - 1}, *b{i - 1}]}}\n"
        for i in range(1, 12)
    ),
    Refused("merge key '<<'", "9:10"),  # refused at the first merge, before it can expand
)
add(
    "undefined-alias",
    BASIC.replace("dtype: bf16", "dtype: *nope"),
    Refused("found undefined alias 'nope'", "5:12"),
)
RECURSIVE = "is inside the node &{0} it names (a recursive alias): a matrix is a tree"
add("alias-to-self-unused", BASIC + "x: &a [*a]\n", Refused("alias *a " + RECURSIVE.format("a"), "8:8"))
add(
    "alias-to-self-in-axis",
    BASIC.replace("arch: sm90", "arch: &a [sm90, *a]"),
    Refused("alias *a " + RECURSIVE.format("a"), "4:21"),
)
add(
    "alias-to-self-in-problem",
    problem("&p {experts: 2, rows: 64, n: 256, k: 128, x: *p}"),
    Refused("alias *p " + RECURSIVE.format("p"), "7:60"),
)
add(
    "recursive-suite-list",
    BASIC.replace("suites:\n", "suites: &s\n").replace(PROBLEM, "problems: *s"),
    Refused("alias *s " + RECURSIVE.format("s"), "7:15"),
)
add(
    "alias-of-a-sibling",
    BASIC.replace("dtype: bf16", "dtype: &d bf16").replace("    tile:", "    name: *d\n    tile:"),
    Loads(3),
)
add(  # *d is the inner &d, closed: no cycle, a list with bf16 twice
    "anchor-redefined-inside-itself",
    ONE_TILE.replace("dtype: bf16", "dtype: &d [&d bf16, *d]"),
    Refused("dtype lists bf16 twice", "5:16"),
)
add("anchor-redefined", BASIC + "x: &a 1\ny: &a 2\n", Refused("unknown key 'x'", "8:1"))

# --- YAML constructs ruamel itself may trip on -----------------------------------------------
add(
    "huge-int",
    problem("{experts: 2, rows: 64, n: " + "9" * 5000 + ", k: 128}"),
    Refused("an integer of 5,000 digits: no matrix value has more than 20", "7:41"),
)
add(
    "huge-int-in-expectations",
    BASIC + "expectations:\n  sm90-bf16-128x64x64-c1x1x1-none: {stage: compile, smem: " + "1" * 5000 + "}\n",
    Refused("an integer of 5,000 digits", "9:59"),
)
add("int-of-twenty-digits", problem("{experts: 2, rows: 64, n: " + "0" * 17 + "256, k: 128}"), Loads(1))
add("inf", problem("{experts: 2, rows: 64, n: .inf, k: 128}"), Refused("valid integer", "7:38"))
add("nan", problem("{experts: 2, rows: 64, n: .nan, k: 128}"), Refused("valid integer", "7:38"))
PYTHON_TAG = "a Python object tag: a matrix is data and never names Python objects"
CORE_ONLY = "a matrix takes no YAML tags (quote a value that must stay text); remove it"
add(
    "python-tag",
    BASIC.replace("dtype: bf16", "dtype: !!python/object:os.system {}"),
    Refused(f"tag !!python/object:os.system: {PYTHON_TAG}", "5:12"),
)
add(
    "python-tag-verbatim",
    BASIC.replace("dtype: bf16", "dtype: !<tag:yaml.org,2002:python/object/apply:os.system> [echo hi]"),
    Refused(f"tag !!python/object/apply:os.system: {PYTHON_TAG}", "5:12"),
)
add(
    "python-tag-on-suites",
    BASIC.replace("suites:\n", "suites: !!python/object/apply:os.system\n"),
    Refused(f"tag !!python/object/apply:os.system: {PYTHON_TAG}", "3:9"),
)
add(
    "python-tag-verbatim-on-suites",
    BASIC.replace("suites:\n", "suites: !<tag:yaml.org,2002:python/tuple>\n"),
    Refused(f"tag !!python/tuple: {PYTHON_TAG}", "3:9"),
)
add(
    "python-name-tag",
    BASIC.replace("dtype: bf16", "dtype: !!python/name:os.system ''"),
    Refused(f"tag !!python/name:os.system: {PYTHON_TAG}", "5:12"),
)
add(
    "python-tag-through-tag-directive",
    "%TAG !p! tag:yaml.org,2002:python/\n---\n"
    + BASIC.replace("dtype: bf16", "dtype: !p!object:os.system {}"),
    Refused(f"tag !!python/object:os.system: {PYTHON_TAG}", "7:12"),
)
add(
    "binary-tag",
    BASIC.replace("dtype: bf16", "dtype: !!binary aGVsbG8="),
    Refused(f"tag !!binary: {CORE_ONLY}", "5:12"),
)
add(
    "bad-timestamp",
    BASIC.replace("dtype: bf16", "dtype: !!timestamp 2001-13-45"),
    Refused(f"tag !!timestamp: {CORE_ONLY}", "5:12"),
)
add(
    "set-tag", BASIC.replace("dtype: bf16", "dtype: !!set {bf16}"), Refused(f"tag !!set: {CORE_ONLY}", "5:12")
)
add(
    "custom-tag",
    BASIC.replace("dtype: bf16", "dtype: !mine bf16"),
    Refused(f"tag !mine: {CORE_ONLY}", "5:12"),
)
add(
    "local-tag-on-a-suite",
    BASIC.replace("  - arch: sm90", "  - !mine\n    arch: sm90"),
    Refused(f"tag !mine: {CORE_ONLY}", "4:5"),
)
add(
    "local-tag-on-problems",
    problem("!foo {experts: 2, rows: 64, n: 256, k: 128}"),
    Refused(f"tag !foo: {CORE_ONLY}", "7:15"),
)
add("local-tag-on-an-int", problem("{experts: !i 2, rows: 64, n: 256, k: 128}"), Refused("tag !i:", "7:25"))
add(
    "global-tag-elsewhere",
    "%TAG !e! tag:example.com,2000:\n---\n" + BASIC.replace("dtype: bf16", "dtype: !e!dt bf16"),
    Refused(f"tag tag:example.com,2000:dt: {CORE_ONLY}", "7:12"),
)
add("core-tag", BASIC.replace("dtype: bf16", "dtype: !!str bf16"), Refused(f"tag !!str: {CORE_ONLY}", "5:12"))
add("non-specific-tag", BASIC.replace("dtype: bf16", "dtype: ! bf16"), Loads(3))
MERGE = "merge key '<<' (YAML 1.1): a matrix does not merge mappings"
add(
    "merge-key-in-a-suite",
    BASIC.replace("  - arch: sm90", "  - <<: {arch: sm90}\n    name: x"),
    Refused(MERGE, "4:5"),
)
add(
    "merge-key-from-an-alias",
    BASIC.replace("  - arch: sm90", "  - &base\n    arch: sm90") + "  - <<: *base\n    dtype: fp16\n",
    Refused(MERGE, "9:5"),
)
add("merge-key-at-the-top", "<<: {version: 1}\n" + BASIC.replace("version: 1\n", ""), Refused(MERGE, "1:1"))
add("merge-key-in-a-problem", problem("{<<: {experts: 2}, rows: 64, n: 256, k: 128}"), Refused(MERGE, "7:16"))
add(
    "merge-key-in-expectations",
    BASIC + "expectations:\n  <<: {sm90-bf16-128x64x64-c1x1x1-none: pass}\n",
    Refused(MERGE, "9:3"),
)
add(
    "merge-key-in-an-expectation",
    BASIC + "expectations:\n  sm90-bf16-128x64x64-c1x1x1-none: {<<: {stage: compile}}\n",
    Refused(MERGE, "9:37"),
)
add("merge-key-quoted-is-a-key", BASIC + "'<<': 1\n", Refused("unknown key '<<'", "8:1"))
UNDERSCORE = "'_' between digits is YAML 1.1 (YAML 1.2 reads it as text)"
add(
    "underscore-int",
    problem("{experts: 2, rows: 6_4, n: 256, k: 128}"),
    Refused(f"number 6_4: {UNDERSCORE}; write 64", "7:34"),
)
add(
    "underscore-thousands",
    problem("{experts: 2, rows: 1_000, n: 256, k: 128}"),
    Refused("write 1000", "7:34"),
)
add("underscore-hex", problem("{experts: 2, rows: 0x4_0, n: 256, k: 128}"), Refused("number 0x4_0", "7:34"))
add("underscore-version", BASIC.replace("version: 1", "version: 0_1"), Refused("number 0_1", "1:10"))
add("underscore-float", BASIC + "defaults: {swap_ab: 1_0.5}\n", Refused("number 1_0.5", "8:21"))
add(
    "underscore-quoted-is-text", problem("{experts: 2, rows: '6_4', n: 256, k: 128}"), Refused("rows", "7:28")
)
add("complex-key", BASIC + "? [a, b]\n: 1\n", Refused("", None))
add("null-key", BASIC + "~: 1\n", Refused("Keys should be strings", "1:1"))
add(
    "key-with-brackets",
    BASIC.replace("backend: fake", "b&b [*b]ackend: fake"),
    Refused("unknown key 'b&b [*b]ackend'", "2:1"),
)
add(
    "key-with-parens",
    BASIC.replace("    dtype: bf16", "    dtype(x): bf16"),
    Refused("unknown key 'dtype(x)'", "5:5"),
)
add("int-key", BASIC + "1: 1\n", Refused("Keys should be strings", "8:1"))
add("tab-indent", BASIC.replace("    dtype", "\tdtype"), Refused("invalid YAML"))
add("unclosed-flow", BASIC.replace("[128x64x64,", "[128x64x64,,"), Refused("invalid YAML"))
add("unclosed-quote", BASIC.replace("dtype: bf16", 'dtype: "bf16'), Refused("invalid YAML"))
# YAML 1.1 reads the key n as the boolean false
add("yaml-1.1-directive", "%YAML 1.1\n---\n" + BASIC, Refused("missing key 'n'", "9:38"))
add("yaml-1.2-directive", "%YAML 1.2\n---\n" + BASIC, Loads(3))
add("bad-directive", "%YAML 9.9\n---\n" + BASIC, Refused("invalid YAML"))

# --- the number of cases ---------------------------------------------------------------------
ARCHS = ", ".join(f"sm{n}" for n in range(100, 200))
TILES = ", ".join(
    f"{m}x{n}x64" for m in (64, 128, 256, 512, 1024) for n in (8, 16, 32, 64, 128, 256, 512, 1024)
)
CLUSTERS = ", ".join(f"{a}x{b}x1" for a in range(1, 11) for b in range(1, 11))
PROBLEMS = ", ".join(f"{{name: p{i}, experts: 1, rows: 8, n: 8, k: 8}}" for i in range(100))
HUGE = f"""\
version: 1
backend: fake
suites:
  - arch: [{ARCHS}]
    dtype: [bf16, fp16, fp32]
    tile: [{TILES}]
    cluster: [{CLUSTERS}]
    swap_ab: [false, true]
    fusion: [none, finalize]
    problems: [{PROBLEMS}]
"""
HUGE_COUNT = 100 * 3 * 40 * 100 * 2 * 2 * 100
add(
    "a-billion-cases",
    HUGE,
    Refused(f"expands to {HUGE_COUNT:,} cases, more than the limit of {MAX_CASES:,}", "6:12"),
)
add("a-billion-cases-low-limit", HUGE, Refused("more than the limit of 10", "6:12"), max_cases=10)
SMALL = BASIC.replace("dtype: bf16", "dtype: bf16\n    swap_ab: [false, true]")
add("at-the-limit", SMALL, Loads(6), max_cases=6)
add("over-the-limit", SMALL, Refused("expands to 6 cases, more than the limit of 5", "7:12"), max_cases=5)
add(
    "limit-counts-all-suites",
    BASIC + "  - {arch: sm100, dtype: bf16, tile: 64x64x64, " + PROBLEM + "}\n",
    Refused("expands to 4 cases", "6:12"),
    max_cases=3,
)
add(
    "limit-raised",
    HUGE.replace(f"[{ARCHS}]", "sm90").replace(f"[{CLUSTERS}]", "1x1x1"),
    Loads(3 * 40 * 4 * 100),
    max_cases=48_000,
)
add(
    "cases-through-aliases",
    "a: &a [" + ARCHS + "]\n" + HUGE.replace(f"[{ARCHS}]", "*a"),
    Refused("unknown key 'a'", "1:1"),
)

# --- problem sizes -----------------------------------------------------------------------------
SIZES = {
    "rows-3e9": ("{rows: [3000000000], n: 8, k: 8}", f"less than or equal to {MAX_DIM}", "7:23"),
    "rows-huge-scalar": (
        "{experts: 1024, rows: 3000000000, n: 8, k: 8}",
        f"rows=3000000000 is not between 0 and {MAX_DIM}",
        "7:5",
    ),
    "rows-negative-scalar": ("{experts: 1024, rows: -1, n: 8, k: 8}", "rows=-1 is not between", "7:5"),
    "rows-negative": ("{rows: [-1], n: 8, k: 8}", "greater than or equal to 0", "7:23"),
    "rows-1000-negatives": (
        "{rows: [" + ", ".join(["-1"] * 1000) + "], n: 8, k: 8}",
        "950 more errors from here on are not listed",
        "7:",
    ),
    "n-above": (f"{{rows: [1], n: {MAX_DIM + 1}, k: 8}}", f"less than or equal to {MAX_DIM}", "7:27"),
    "k-above": (f"{{rows: [1], n: 8, k: {MAX_DIM + 1}}}", f"less than or equal to {MAX_DIM}", "7:33"),
    "n-zero": ("{rows: [1], n: 0, k: 8}", "greater than 0", "7:27"),
    "k-negative": ("{rows: [1], n: 8, k: -8}", "greater than 0", "7:33"),
    "experts-1e9-scalar-rows": (
        "{experts: 1000000000, rows: 64, n: 8, k: 8}",
        "experts=1000000000 is more than 1024",
        "7:5",
    ),
    "experts-1025": ("{experts: 1025, rows: 1, n: 8, k: 8}", "more than 1024", "7:5"),
    "experts-zero": ("{experts: 0, rows: [], n: 8, k: 8}", "greater than 0", "7:16"),
    "rows-list-too-long": (
        "{rows: [" + ", ".join(["1"] * 1025) + "], n: 8, k: 8}",
        "at most 1024 items",
        "7:16",
    ),
    "rows-empty": ("{rows: [], n: 8, k: 8}", "rows is empty", "7:5"),
    "elements": (
        "{experts: 64, rows: 65536, n: 16384, k: 16384}",
        f"at most {MAX_ELEMENTS:,} are allowed",
        "7:5",
    ),
    "elements-b": ("{experts: 1024, rows: 0, n: 65536, k: 65536}", "elements (A rows x k", "7:5"),
}
for key, (value, text, where) in SIZES.items():
    add(f"size-{key}", problem(value), Refused(text, where))
add(
    "tile-dim-above",
    BASIC.replace("128x128x64,", "128x8192x64,"),
    Refused("has a dimension above 4096", "6:23"),
)
add(
    "cluster-huge",
    BASIC.replace("dtype: bf16", "dtype: bf16\n    cluster: 99999999999x1x1"),
    Refused("above 4096", "6:5"),
)

# --- strict types ------------------------------------------------------------------------------
VERSIONS = {
    '"1"': "unsupported matrix version '1'",
    "'1'": "unsupported matrix version '1'",
    "true": "unsupported matrix version True",
    "1.0": "unsupported matrix version 1.0",
    "one": "unsupported matrix version 'one'",
    "[1]": "unsupported matrix version [1]",
    "{a: 1}": "unsupported matrix version",
    "0x1": "",  # YAML 1.2 hex: the number 1
}
for raw, text in VERSIONS.items():
    expect: Loads | Refused = Loads(3) if not text else Refused(text, "1:1")
    add(f"version-{raw}", BASIC.replace("version: 1", f"version: {raw}"), expect)
add("version-missing", BASIC.replace("version: 1\n", ""), Refused("unsupported matrix version None", "1:1"))
add(
    "version-null",
    BASIC.replace("version: 1", "version: ~"),
    Refused("unsupported matrix version None", "1:1"),
)
NUMBERS = {
    "n-string": ('{experts: 2, rows: 64, n: "256", k: 128}', "valid integer", "7:38"),
    "n-bool": ("{experts: 2, rows: 64, n: true, k: 128}", "valid integer", "7:38"),
    "n-float": ("{experts: 2, rows: 64, n: 256.0, k: 128}", "valid integer", "7:38"),
    "k-string": ("{experts: 2, rows: 64, n: 256, k: '128'}", "valid integer", "7:46"),
    "experts-string": ('{experts: "2", rows: [1, 2], n: 8, k: 8}', "valid integer", "7:16"),
    "experts-bool": ("{experts: true, rows: [1], n: 8, k: 8}", "valid integer", "7:16"),
    "rows-bool-list": ("{rows: [true], n: 8, k: 8}", "valid integer", "7:23"),
    "rows-bool-scalar": ("{experts: 1, rows: true, n: 8, k: 8}", "valid tuple", "7:28"),
    "rows-string-list": ('{rows: ["8"], n: 8, k: 8}', "valid integer", "7:23"),
    "rows-float": ("{rows: [1.5], n: 8, k: 8}", "valid integer", "7:23"),
    "name-number": ("{name: 12, rows: [1], n: 8, k: 8}", "valid string", "7:16"),
    "name-bool": ("{name: true, rows: [1], n: 8, k: 8}", "valid string", "7:16"),
}
for key, (value, text, where) in NUMBERS.items():
    add(f"type-{key}", problem(value), Refused(text, where))
SWAPS = {
    "yes": "valid boolean",
    '"true"': "valid boolean",
    "1": "valid boolean",
    "0": "valid boolean",
    "on": "valid boolean",
}
for raw, text in SWAPS.items():
    add(
        f"swap-ab-{raw}",
        BASIC.replace("dtype: bf16", f"dtype: bf16\n    swap_ab: {raw}"),
        Refused(text, "6:5"),
    )
add(
    "expectation-smem-string",
    BASIC + 'expectations:\n  sm90-bf16-128x64x64-c1x1x1-none: {stage: run, smem: "1"}\n',
    Refused("valid integer"),
)
add(
    "backend-number",
    BASIC.replace("backend: fake", "backend: 7"),
    Refused("backend: Input should be a valid string", "2:1"),
)
add("backend-list", BASIC.replace("backend: fake", "backend: [fake]"), Refused("valid string", "2:1"))
ARCHES = {
    "90": "arch 90 is not",
    "true": "arch True is not",
    "sm_90": "arch 'sm_90' is not",
    "sm9000": "arch 'sm9000' is not",
    "sm9": "arch 'sm9' is not",
    '"sm\u0669\u0660"': "is not of the form",  # Arabic-Indic digits
    '"sm\uff19\uff10"': "is not of the form",  # fullwidth digits
    '"sm90\\n"': "is not of the form",
    '" sm90"': "is not of the form",
    "sm90a": "is not of the form",
    "{a: 1}": "is not of the form",
}
for raw, text in ARCHES.items():
    add(f"arch-{raw}", BASIC.replace("arch: sm90", f"arch: {raw}"), Refused(text, "4:5"))
add(
    "tile-fullwidth-digits",
    BASIC.replace("128x128x64,", "\uff11\uff12\uff18x128x64,"),
    Refused("is not MxNxK", "6:23"),
)
add("tile-bool-in-list", BASIC.replace("128x128x64,", "[128, 64, true],"), Refused("is not MxNxK", "6:23"))
add("tile-float-in-list", BASIC.replace("128x128x64,", "[128, 64, 64.0],"), Refused("is not MxNxK", "6:23"))
add(
    "dtype-bool",
    BASIC.replace("dtype: bf16", "dtype: true"),
    Refused("valid dictionary or instance of DTypes", "5:5"),
)
add(
    "dtype-number",
    BASIC.replace("dtype: bf16", "dtype: 16"),
    Refused("valid dictionary or instance of DTypes", "5:5"),
)
add("arch-null", BASIC.replace("arch: sm90", "arch: ~"), Refused("no arch given", "6:12"))

# --- names ---------------------------------------------------------------------------------------
NAMES = {
    "double-colon": "'a::b'",
    "slash": "a/b",
    "space": "'a b'",
    "tab": '"a\\tb"',
    "newline": '"a\\nb"',
    "empty": "''",
    "too-long": "a" * 65,
    "non-ascii": "café",
    "brackets": "'a[0]'",
    "null-char": '"a\\0b"',
    "backslash": "'a\\b'",
}
for key, raw in NAMES.items():
    add(
        f"suite-name-{key}",
        ONE_TILE.replace("  - arch", f"  - name: {raw}\n    arch"),
        Refused("must be 1 to 64 of letters", "4:5"),
    )
    add(
        f"problem-name-{key}",
        problem(f"{{name: {raw}, experts: 2, rows: 64, n: 256, k: 128}}"),
        Refused("must be 1 to 64 of letters", "7:16"),
    )
