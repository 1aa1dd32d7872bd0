"""Callgrind instruction counts for many cases in a few valgrind processes.

`Timer.collect_callgrind` starts one valgrind process per statement and imports
torch in it with instrumentation on: that import is most of its time per
statement. Here a batch of cases runs like this:

* **Few valgrind processes.** One *template* Python process per core runs under
  ``valgrind --tool=callgrind --instr-atstart=no``; it imports torch once,
  uninstrumented (a fraction of the instrumented import's time).
* **One fork per case.** The template forks a child per case. Every child
  starts from the same post-import state, so a case's count does not depend on
  which cases ran before it, on the shard it landed in, or on ``--filter``.
  A child that crashes, hangs or raises costs only its own case: the supervisor
  records the failure and the template carries on.
* **Instrumentation only around the measured region.** The template discards
  the import's translations before forking, so a child's
  ``CALLGRIND_START_INSTRUMENTATION`` (which throws away all translated code)
  is cheap; it then runs a small fixed workload (eager ops, autograd, a
  TorchScript load, an extension load) whose translations every child
  inherits for its uninstrumented setup, so children do not translate those
  paths again one by one. Setup
  and a warm-up execution run uninstrumented; the statement then runs in
  collected regions that are each dumped to their own file (a probe
  execution, then ``REPEATS`` repeats of ``number`` executions; a statement
  that fills a repeat alone has its probe as the first of its repeats).
* **torch.compile cases** run in a *compile template*: a process forked from
  the template that imports dynamo and inductor once per batch (instead of
  once per case: a slow import under valgrind) and then forks their children.
  Which template a case runs in follows from its setup alone, so its count
  still does not depend on the batch.
* **C++ cases** are compiled into a few shared extension modules (the shard
  layout and content-keyed cache of `benchkit.measure.cpp.shards`, with a counting
  function per case instead of a timing one) and run in the same children.

Determinism: the same case on the same build repeats exactly. What could move
a count and what holds it still:

* hash randomisation: ``PYTHONHASHSEED=0``; Python's `random` seeded per case;
* the place (checkout, cache and installation paths, environment, argv,
  working directory, HOME): the template runs in a fixed-name folder under
  fixed names for its code, Python, torch and files, with a fixed environment
  and command line, whatever the caller's (`place`);
* what the case loads: TorchScript artifacts and C++ shards are the same bytes
  wherever and whenever they were made (no paths, dates, random ids or unseeded
  parameters in them: `benchkit.measure.cpp.torchscript`, `benchkit.measure.cpp.shards`);
* address-space layout: ASLR off (``setarch -R``) where the kernel allows;
* what ran before: each case is forked from the same template state; the
  template's fork loop does identical work per case (fixed-width protocol and
  file names), and a child allocates nothing pid-dependent before measuring;
* garbage collection: collected before, disabled during, the measured region;
  CPython's type attribute cache emptied after setup;
* allocator and interpreter warm-up (malloc free lists, CPython's adaptive
  specialisation): ``WARMUP`` uninstrumented executions and the probe;
* the number of executions per repeat comes from the probe's *count*, never a
  clock, bucketed to a power of two so that small changes do not move it;
* thread pools: OpenMP waits passively (no spinning counted under valgrind's
  serialised threads); torch.compile gets a fresh cache per case;
* the statistic: the *minimum* of the repeats, per execution. glibc malloc
  from time to time consolidates its fast bins (tens of thousands of
  instructions); whether a repeat catches one depends on the heap's layout,
  which any change to setup or torch shifts. The median of the repeats follows
  such a change by percents for a small Python statement when unrelated setup
  objects change size; the minimum barely moves (docs/instruction_counts.md).

Valgrind emulates AVX2 (not AVX-512), so torch picks its AVX2 kernels; the
CPU capability seen under valgrind is recorded in the batch metadata. MKL is
limited to SSE4.2 kernels (``MKL_ENABLE_INSTRUCTIONS``): valgrind emulates FMA
instructions far more slowly than others, which makes a linear layer of a few
hundred features take seconds per execution; its counts then describe MKL's
SSE kernels.

Modules: `policy` (executions and repeats), `child` and `control` (what runs
under valgrind: standard library and torch only), `place` (the canonical launch),
`template` (one valgrind process as the supervisor sees it), `supervisor` and `batch` (scheduling a batch,
reading its results), `dumps` (Callgrind's files), `count_cache` and `durations`
(what earlier batches left), `profiles` (function-level profiles on disk), `metric`
(asv's ``track_instructions``). C++ cases run counting functions compiled into the
shards of `benchkit.measure.cpp.shards`, beside their timing functions.
"""
