"""The compiled run side of many runs' bootstrap Spearman sums (evaluation/_spearman.c)."""

import numpy as np

def sums(counts: np.ndarray, ys: np.ndarray, orders: np.ndarray, ends: np.ndarray,
         below: np.ndarray, extra_cy: np.ndarray, extra_g3: np.ndarray,
         portable: bool = ...) -> None: ...
