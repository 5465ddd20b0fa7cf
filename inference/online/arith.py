"""Left-to-right float summation for the readable specifications.

Python 3.12's built-in ``sum`` of floats is compensated (Neumaier), while the numba kernels
add left to right; the specifications use :func:`plain_sum` so that both compute the same
rounded numbers and the kernels can be checked against them to 1e-12.
"""

from __future__ import annotations


def plain_sum(xs) -> float:
    """``((x0 + x1) + x2) + …``, the order the kernels use."""
    acc = 0.0
    for x in xs:
        acc += x
    return acc


def ieee(xs) -> list:
    """Cast to ``numpy.float64`` so that ``x / 0`` gives ``inf``/``nan`` (as the kernels,
    compiled with numba's ``error_model="numpy"``, do) instead of raising: a broken moment
    match must reach the guards, not crash the pass."""
    import numpy as np
    return [np.float64(x) for x in xs]


def exp(x) -> float:
    """``math.exp`` with IEEE overflow to ``inf`` (the same numbers as the kernels' exp)."""
    import math
    try:
        return math.exp(x)
    except OverflowError:
        return math.inf
