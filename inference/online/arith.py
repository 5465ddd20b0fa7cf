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
