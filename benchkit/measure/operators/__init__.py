"""TorchInductor operator speedups: each aten op on logged inputs, eager vs compiled.

The method follows PyTorch's ``operatorbench.py``: for every logged input of
an operator, build a one-node FX graph (``gen_gm_and_inputs``), compile it
with ``compile_fx`` (once per inductor config), time eager and compiled
*interleaved* so changing machine load hits both alike, and report the
20th/50th/80th percentile of eager/compiled speedups across inputs.

Differences, all deliberate: logs are parsed without ``eval``
(`benchkit.measure.operators.inputs`), operator names are resolved by attribute lookup, the
CPU path is first class and built for repeatability on shared machines (one
thread, call-by-call alternation, rounds spread over all inputs, fastest round
kept; see `measure_inputs`), compile time is measured per input, the inductor
and Triton caches live in benchkit's cache (per torch build) so every process of
a build times the same kernels and autotuning choices, what inductor generated is
recorded per input (`benchkit.measure.operators.kernels`), eager and compiled are
replayed from CUDA graphs on CUDA, and ops that inductor only hands back to aten
("fallbacks") are skipped with that reason because their ratio measures nothing
but wrapper overhead. docs/operators.md lists every difference and why.

The package imports torch lazily: asv and ``benchkit --help`` import it."""
