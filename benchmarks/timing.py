"""Timing one solve the way every scheduling benchmark here does.

The solve is timed without tracemalloc (it slows this allocation-heavy code several-fold) and
the peak memory comes from a second, untimed solve of the same input under tracemalloc. With
``profile`` a cProfile of the timed solve goes to stderr (top 25 by cumulative time).
"""

from __future__ import annotations

import cProfile
import pstats
import sys
import time
import tracemalloc

from provisioner.scheduling.solver import Plan, SolverInput, solve


def timed_solve(given: SolverInput, profile: bool = False) -> tuple[Plan, float, int]:
    """``(plan, seconds, peak bytes)`` of ``solve(given)``."""
    profiler = cProfile.Profile() if profile else None
    start = time.perf_counter()
    if profiler:
        profiler.enable()
    plan = solve(given)
    if profiler:
        profiler.disable()
    elapsed = time.perf_counter() - start
    tracemalloc.start()
    solve(given)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    if profiler:
        pstats.Stats(profiler, stream=sys.stderr).sort_stats("cumulative").print_stats(25)
    return plan, elapsed, peak
