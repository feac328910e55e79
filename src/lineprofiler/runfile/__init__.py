"""The on-disk format of a run, alone: where files live (``layout``), what a worker document
holds and how it is checked (``worker_doc``, ``stats``), and the sampler's sidecars
(``samples``). Recording (``lineprofiler.accounting``) and reporting (``lineprofiler.report``)
both import it; it imports neither.
"""
