"""How fast this machine runs the suite's kind of work today: two fixed workloads, timed.

    python bench/tools/speed.py          # prints one JSON object

Why: machines of the same name ("Intel(R) Xeon(R) Processor", 2 CPUs) ran the same code
at very different speeds from one day to the next (the same default audit at one commit:
97 s on one day, 149 s on another; the whole suite 28 min on one, 13 on another). A
record's wall time alone cannot tell a faster code from a faster machine, so records carry
this probe, measured beside them: every benchmark that stamps its record
(``bench/tools/stamp.py``), the suite's (``bench/bench_suite.py``) and SBC's
(``bench/bench_sbc.py``); ``make verify`` prints it.

The two workloads are what the suite spends its time on:

* ``python_s``: a fixed pure-Python loop (integer arithmetic and a dict), best of three;
* ``xla_compile_s``: XLA compiling four fixed programs (``lax.fori_loop`` over a small
  log density with gathers, its gradient and Hessian, as a NUTS step holds them), in a
  fresh process with no compilation cache configured, so they are compiled every time;
  best of two processes.

Both are CPU seconds of one thread on an otherwise idle machine; the load average at the
start is reported beside them (a loaded machine makes both larger). A smaller number is a
faster machine; the ratio of two records' probes is the speed ratio of their machines for
this kind of work, to within the probe's own spread (a few per cent run to run).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

#: iterations of the pure-Python loop (0.9 CPU-s on the 2-core Xeon of 2026-12-04)
LOOP_N = 8_000_000

_COMPILE = r"""
import time
import jax, jax.numpy as jnp
from jax import lax

idx = jnp.arange(256) % 37

def logp(y):
    z = y[idx] - y[(idx * 7 + 3) % 37]          # gathers, as the likelihood's
    return jnp.sum(jax.nn.log_sigmoid(z)) - 0.5 * jnp.sum(y ** 2)

def step(i, carry):
    x, g = carry
    v, d = jax.value_and_grad(logp)(x + 0.01 * g)
    return (x + 1e-3 * d * v, jax.hessian(logp)(x) @ d)

t = time.process_time()
for n in range(4):                              # four programs, one per loop length
    jax.jit(lambda x: lax.fori_loop(0, 10 + n, step, (x, x))).lower(jnp.ones(37)).compile()
print(time.process_time() - t)
"""

def python_seconds(n: int = LOOP_N) -> float:
    """CPU seconds of the fixed pure-Python loop, best of three."""
    best = float("inf")
    for _ in range(3):
        t = time.process_time()
        d, s = {}, 0
        for i in range(n):
            s = (s + i * i) % 1_000_003
            d[i & 1023] = s
        best = min(best, time.process_time() - t)
    return round(best, 3)


def xla_compile_seconds(repeats: int = 2) -> float:
    """CPU seconds of XLA compiling the four fixed programs, in a fresh process each time,
    best of ``repeats``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_COMPILATION")}
    env.setdefault("JAX_PLATFORMS", "cpu")
    out = []
    for _ in range(repeats):
        r = subprocess.run([sys.executable, "-c", _COMPILE], capture_output=True, text=True,
                           env=env, check=True)
        out.append(float(r.stdout.strip().splitlines()[-1]))
    return round(min(out), 3)


def speed_probe() -> dict:
    """``{"python_s", "xla_compile_s", "load_before"}`` (see the module doc)."""
    load = [round(x, 2) for x in os.getloadavg()]
    return {"python_s": python_seconds(), "xla_compile_s": xla_compile_seconds(),
            "load_before": load,
            "what": "bench/tools/speed.py: CPU s of a fixed pure-Python loop (best of 3) and "
                    "of XLA compiling four fixed programs in a fresh process (best of 2); "
                    "smaller is faster"}


if __name__ == "__main__":
    print(json.dumps(speed_probe()))
