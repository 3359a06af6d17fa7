"""numpy's PCG64 bounded uint32 draws, counted as they are drawn (evaluation/_draws.c)."""

from typing import Any

State = tuple[int, int, int, int]
"""(state >> 64, state & (2**64 - 1), has_uint32, uinteger): a PCG64 state (inc unchanged)."""

def count(state_hi: int, state_lo: int, inc_hi: int, inc_lo: int, has_uint32: int,
          uinteger: int, n: int, rows: int, out: Any, cell_of: Any | None,
          k: int, level: int = 2, /) -> State | None:
    """rows x n draws counted per row into out (rows x k, uint8/16/32), through cell_of (n
    uint16/uint32 cells) when given; the state after them, or None when a count wrapped.
    level 2: uint8 counts per pair drawn in AVX-512 IFMA where the processor has it; 0: the
    scalar path (the same draws and counts)."""

def fill(state_hi: int, state_lo: int, inc_hi: int, inc_lo: int, has_uint32: int,
         uinteger: int, n: int, out: Any, /) -> State:
    """out (uint32) filled with the draws; the state after them."""

def reduce(counts: Any, rows: int, n: int, cell_of: Any, k: int, out: Any, /) -> None:
    """out (rows x k float64): each row of counts (rows x n, uint8/16/32) summed per cell."""

def moments(counts: Any, rows: int, n: int, x: Any, y: Any, out: Any, level: int = 2,
            /) -> int:
    """out (rows x 6 float64): each row of counts (rows x n, uint8/16/32) times the columns 1,
    x, y, x*x, y*y, x*y (n float64 each), by the best build the processor runs up to level (2
    AVX-512, 1 AVX2, 0 plain C). The level that ran."""

def weighted_moments(counts: Any, rows: int, n: int, x: Any, y: Any, w: Any, out: Any,
                     level: int = 2, /) -> int:
    """out (rows x 6 float64): as moments, every column times w (n float64): w, w*x, w*y,
    w*x*x, w*y*y, w*x*y. The level that ran."""

def both_moments(counts: Any, rows: int, n: int, x: Any, y: Any, w: Any, out: Any, wout: Any,
                 level: int = 2, /) -> int:
    """moments into out and weighted_moments into wout (rows x 6 float64, two arrays) in one
    pass over the counts, x, y and w. The level that ran."""

def builds() -> tuple[int, int]:
    """The builds this processor runs: the draws' (2 AVX-512 with IFMA, 0 scalar) and the
    moments' (2 AVX-512, 1 AVX2, 0 plain C)."""
