"""Renderers of a merged run (``lineprofiler.accounting.model.MergedRun``): text and JSON.

Renderers read the merged-run object only; they never touch a live profiler.
"""
