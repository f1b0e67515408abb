"""TensorRT-LLM's weight preprocessing for its mixed-input GEMM on arch 90
(``preprocess_weights_for_mixed_gemm``), written step by step on plain lists as its sources
describe each step, so that the dense backend's vectorised layout (``flashinfer_dense.weight_only``)
is checked against something it does not share code with.

The steps, on the K x N signed weights: the rows permuted within blocks so that LDSM lands each
pair of rows in its thread (``permute_B_rows_for_mixed_gemm``), transposed to N x K
(``subbyte_transpose``), no column interleave on arch 90, then a bias making the values unsigned
and the elements of each 32-bit word reordered (``add_bias_and_interleave_*s_inplace``).
"""

from __future__ import annotations

#: bits per weight element
BITS = {"int4": 4, "int8": 8}


def row_permutation(bits: int) -> list[int]:
    """Within a block of 8 * 16 / bits rows: pairs of rows 8 apart, as the sources' maps list them
    (int4: 0 1 8 9 16 17 24 25 2 3 ...; int8: 0 1 8 9 2 3 10 11 ...)."""
    rows = 8 * 16 // bits
    pairs = rows // 8
    return [i % 2 + 8 * ((i // 2) % pairs) + 2 * (i // (2 * pairs)) for i in range(rows)]


def word_order(bits: int) -> list[int]:
    """From the sources' pictures of a 32-bit word after the reorder, most significant first:
    int4 [elt_7 elt_5 elt_3 elt_1 elt_6 elt_4 elt_2 elt_0], int8 [elt_3 elt_1 elt_2 elt_0];
    returned least significant first: stored element i is element ``order[i]``."""
    picture = "7 5 3 1 6 4 2 0" if bits == 4 else "3 1 2 0"
    return [int(e) for e in reversed(picture.split())]


def preprocess(w_nk: list[list[int]], weight: str) -> bytes:
    """The bytes the launcher reads for weights given N x K (signed)."""
    bits = BITS[weight]
    n, k = len(w_nk), len(w_nk[0])
    kn = [[w_nk[col][row] for col in range(n)] for row in range(k)]  # the K x N the sources take
    perm = row_permutation(bits)
    permuted = [kn[row - row % len(perm) + perm[row % len(perm)]] for row in range(k)]
    transposed = [[permuted[row][col] for row in range(k)] for col in range(n)]
    biased = [[v + (1 << (bits - 1)) for v in row] for row in transposed]
    order, per_word = word_order(bits), 32 // bits
    words = [
        [row[base + order[i]] for base in range(0, k, per_word) for i in range(per_word)] for row in biased
    ]
    out = bytearray()
    for row in words:
        if bits == 8:
            out.extend(row)
        else:
            out.extend(row[j] | (row[j + 1] << 4) for j in range(0, k, 2))
    return bytes(out)
