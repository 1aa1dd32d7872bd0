"""Helpers shared by test modules, grouped by job, so that no test module imports another.

pytest puts ``tests/`` on ``sys.path`` (rootdir-relative "prepend" import mode: the folder has
no ``__init__.py``), so test modules import these as ``support.<module>``.
"""
