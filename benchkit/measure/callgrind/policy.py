"""How many executions and repeats a case gets under Callgrind (standard library only).

Imported by the worker that runs under valgrind (`child`) and by the supervisor.
"""

from __future__ import annotations

# Executions before instrumentation starts (setup's lazy initialisation). The
# allocator's and interpreter's slower settling shows in early repeats, which
# the minimum leaves out; the probe is a second warm-up for cases with several
# executions per repeat. Heavy statements cost seconds per execution here.
WARMUP = 1
# Collected repeats per case; the reported count is their minimum (see `repeats_for`).
REPEATS = 5
# A case whose single execution fills a repeat needs fewer: its count dwarfs the
# allocator's occasional extra work, and each repeat costs seconds under valgrind.
# Its probe is already such a repeat (one execution, zeroed and dumped alike), so
# it counts as the first: the heavy cases hold most of the instructions counted.
SINGLE_EXECUTION_REPEATS = 2
# A repeat should hold about this many instructions: enough executions that the
# few hundred instructions of starting and dumping a region weigh little (and
# the same in every run), few enough that some repeats escape glibc's periodic
# consolidation (below). Repeats are most of the instrumented time of a light case.
TARGET_REPEAT_INSTRUCTIONS = 500_000
# Statements above this many instructions run once per repeat; below, at least twice.
SINGLE_EXECUTION_INSTRUCTIONS = 500_000
MAX_NUMBER = 1024
DEFAULT_CASE_TIMEOUT = 300.0
TEMPLATE_START_TIMEOUT = 600.0
MKL_INSTRUCTIONS = "SSE4_2"


def repeats_for(number: int) -> int:
    """Measured repeats of a case run `number` executions per repeat."""
    return REPEATS if number > 1 else SINGLE_EXECUTION_REPEATS


def repeats_after_probe(number: int) -> int:
    """Repeats run after the probe: with one execution per repeat the probe is the first."""
    return repeats_for(number) - (number == 1)


def measured_dumps(number: int) -> range:
    """Which of a child's dumps (numbered from 1, the probe) are its measured repeats."""
    first = 1 if number == 1 else 2
    return range(first, first + repeats_for(number))


def choose_number(probe_instructions: int) -> int:
    """Executions per repeat: a power of two so that a repeat holds ~TARGET instructions."""
    if probe_instructions > SINGLE_EXECUTION_INSTRUCTIONS:
        return 1
    wanted = TARGET_REPEAT_INSTRUCTIONS // max(probe_instructions, 1)
    number = 2
    while number * 2 <= min(wanted, MAX_NUMBER):
        number *= 2
    return number
