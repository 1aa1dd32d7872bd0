"""The site: asv's graphs plus pages that explain the history (`benchkit publish`).

``asv publish`` answers *did anything get slower* with one graph per
benchmark; its page moves to ``graphs.html``. benchkit adds, into the same
``html/`` folder:

* ``index.html``, the front page (`benchkit.report.site.landing`): the newest
  build of each branch against the one before it, the newest steps over the
  history, what the history holds, and links to everything else.
* ``changes.html``: for every consecutive pair of measured commits on each
  branch (and machine), the benchmarks that changed beyond their threshold,
  grouped by metric. Thresholds and the comparison itself are `benchkit.report.gate.check`'s,
  so the site and the regression gate never disagree about what changed.
  Each build's upstream PyTorch commit (``git_version``) is shown and linked.
* ``regressions.html``: the steps over each machine's whole history
  (`benchkit.report.steps.changepoints`), labelled per case.
* ``why.html`` and ``why/*.html``: for every instruction-count change, where
  the instructions went -- the function-level Callgrind diff between the two
  commits (`benchkit.measure.callgrind.profiles`), grouped into ATen/c10, the Python interpreter,
  the allocator, torch's bindings/autograd and everything else.
* ``operators.html``: per commit, operatorbench's table (20/50/80th percentile
  speedups, eager and compiled time, compile time), sortable, with each
  operator's median speedup over the builds before it as an inline SVG plot.

Changes, regressions, why and operators grow with the history: each keeps its newest items
on its own page and every item on the page of its month (`benchkit.report.site.paging`).

Everything is static: data is written into the pages (no XHR), so they open
from ``file://`` as well as from any static server, and the third-party
scripts asv's page takes from CDNs are pointed at local copies
(``benchkit/report/site/assets/vendor``), so the site fetches nothing from the network.
"""
