"""``--tile-shard i/n``: split the matrix cases among n runners, deterministically.

A case belongs to shard ``sha256(case id) mod n`` (shards are numbered 1..n on the command
line). Hashing the id rather than taking positions keeps every existing case in its shard when
cases are added to or removed from a matrix, and makes the split the same on every machine and
under pytest-xdist. Shards are balanced only statistically (a shard of a small matrix may even
be empty); ``tileconform report merge`` puts their results back together.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

_SPEC = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$", re.ASCII)
#: The most shards: one a CI runner, so more is a typo (and a number of thousands of digits
#: would stop Python's own conversion).
MAX_SHARDS = 100_000


class ShardSpecError(ValueError):
    pass


@dataclass(frozen=True)
class Shard:
    index: int  # 1-based
    count: int

    @classmethod
    def parse(cls, spec: str) -> Shard:
        match = _SPEC.match(spec)
        if not match:
            raise ShardSpecError(f"--tile-shard {spec!r}: expected I/N with whole numbers, e.g. 2/4")
        if max(len(match.group(1)), len(match.group(2))) > len(str(MAX_SHARDS)):
            raise ShardSpecError(f"--tile-shard {spec[:40]!r}: at most {MAX_SHARDS:,} shards")
        index, count = int(match.group(1)), int(match.group(2))
        if count > MAX_SHARDS:
            raise ShardSpecError(f"--tile-shard {spec!r}: at most {MAX_SHARDS:,} shards")
        if count < 1:
            raise ShardSpecError(f"--tile-shard {spec!r}: N must be at least 1")
        if not 1 <= index <= count:
            raise ShardSpecError(f"--tile-shard {spec!r}: I must be between 1 and N={count}")
        return cls(index, count)

    def owns(self, case_id: str) -> bool:
        return shard_of(case_id, self.count) == self.index

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def shard_of(case_id: str, count: int) -> int:
    """The 1-based shard of ``case_id`` among ``count`` shards."""
    digest = hashlib.sha256(case_id.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % count + 1
