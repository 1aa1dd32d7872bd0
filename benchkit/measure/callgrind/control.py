"""The small C extension through which a worker under valgrind zeroes, dumps and
discards (Callgrind client requests that torch does not expose).
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

# No benchkit imports at the top: the worker under valgrind imports this module.


CONTROL_MODULE = "benchkit_callgrind_control"


def control_source() -> str:
    """A minimal CPython extension for the client requests torch does not expose.

    Why not torch's ``_valgrind_toggle``: callgrind keeps the collect flag per
    thread, so toggling counts only the calling thread and misses the work of
    intra-op threads (a 2-thread matmul counted half). Instead collection is on
    for every thread and a measured region is ``zero()`` ... ``dump_*()``.
    METH_NOARGS functions: a few dozen instructions per call, not ctypes' thousands.
    """
    return textwrap.dedent(
        f"""\
        #define PY_SSIZE_T_CLEAN
        #include <Python.h>
        #include <stdio.h>
        #include <stdlib.h>
        #include <string.h>
        #include <unistd.h>
        #include "callgrind.h"

        #define NOARGS(name) static PyObject* name(PyObject* self, PyObject* unused)
        NOARGS(zero) {{ CALLGRIND_ZERO_STATS; Py_RETURN_NONE; }}
        NOARGS(dump_probe) {{ CALLGRIND_DUMP_STATS_AT("probe"); Py_RETURN_NONE; }}
        NOARGS(dump_repeat) {{ CALLGRIND_DUMP_STATS_AT("repeat"); Py_RETURN_NONE; }}
        NOARGS(start_instrumentation) {{ CALLGRIND_START_INSTRUMENTATION; Py_RETURN_NONE; }}
        NOARGS(discard_translations) {{
          VALGRIND_DISCARD_TRANSLATIONS(0x1000, ~(unsigned long)0xfff);
          Py_RETURN_NONE;
        }}
        NOARGS(running_on_valgrind) {{ return PyLong_FromLong(RUNNING_ON_VALGRIND); }}

        /* Total of this process's first dump (the probe), read without Python objects
           whose size would depend on the pid's digits. */
        static PyObject* probe_total(PyObject* self, PyObject* prefix) {{
          char path[4096], line[512];
          long long total = -1;
          if (!PyBytes_Check(prefix)) {{
            PyErr_SetString(PyExc_TypeError, "prefix must be bytes");
            return NULL;
          }}
          snprintf(path, sizeof path, "%s.%d.1", PyBytes_AS_STRING(prefix), (int)getpid());
          FILE* f = fopen(path, "r");
          if (f == NULL) return PyErr_SetFromErrnoWithFilename(PyExc_OSError, path);
          while (total < 0 && fgets(line, sizeof line, f) != NULL) {{
            if (strncmp(line, "summary:", 8) == 0 || strncmp(line, "totals:", 7) == 0)
              total = strtoll(strchr(line, ':') + 1, NULL, 10);
          }}
          fclose(f);
          if (total < 0) return PyErr_Format(PyExc_ValueError, "%s: no summary line", path);
          return PyLong_FromLongLong(total);
        }}

        static PyMethodDef methods[] = {{
          {{"zero", zero, METH_NOARGS, NULL}},
          {{"dump_probe", dump_probe, METH_NOARGS, NULL}},
          {{"dump_repeat", dump_repeat, METH_NOARGS, NULL}},
          {{"start_instrumentation", start_instrumentation, METH_NOARGS, NULL}},
          {{"discard_translations", discard_translations, METH_NOARGS, NULL}},
          {{"running_on_valgrind", running_on_valgrind, METH_NOARGS, NULL}},
          {{"probe_total", probe_total, METH_O, NULL}},
          {{NULL, NULL, 0, NULL}},
        }};
        static struct PyModuleDef module = {{PyModuleDef_HEAD_INIT, "{CONTROL_MODULE}", NULL, -1, methods}};
        PyMODINIT_FUNC PyInit_{CONTROL_MODULE}(void) {{ return PyModule_Create(&module); }}
        """
    )


def load_extension(name: str, path: str) -> Any:
    loader = importlib.machinery.ExtensionFileLoader(name, path)
    spec = importlib.util.spec_from_file_location(name, path, loader=loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def valgrind_headers() -> Path:
    import torch.utils.benchmark.utils.valgrind_wrapper as wrapper

    return Path(wrapper.__file__).resolve().parent


def build_control_library() -> Path:
    """Compile the control extension (`control_source`) for this Python; cached by content."""
    import sysconfig

    from benchkit.measure.callgrind.results import ValgrindUnavailable
    from benchkit.util import atomic_path, cache_dir, content_key

    headers = valgrind_headers()
    python_include = sysconfig.get_paths()["include"]
    source = control_source()
    header_text = (headers / "callgrind.h").read_text() + (headers / "valgrind.h").read_text()
    key = content_key(source, header_text, sys.version, python_include)
    directory = cache_dir("callgrind", "control", key)
    library = directory / f"{CONTROL_MODULE}{sysconfig.get_config_var('EXT_SUFFIX') or '.so'}"
    if library.exists():
        return library
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise ValgrindUnavailable("no C compiler (cc/gcc) to build the callgrind control extension")
    source_path = directory / "control.c"
    source_path.write_text(source)
    with atomic_path(library) as tmp:
        cmd = [compiler, "-O2", "-shared", "-fPIC", f"-I{headers}", f"-I{python_include}"]
        done = subprocess.run([*cmd, str(source_path), "-o", str(tmp)], capture_output=True, text=True)
        if done.returncode:
            raise ValgrindUnavailable(f"building the callgrind control extension failed:\n{done.stderr}")
    return library


def priming_copy(control_library: Path) -> Path:
    """A second file of the control extension: loading it in the template runs the
    dynamic loader's paths that every C++ case's extension loading takes."""
    return control_library.parent / "prime" / control_library.name
