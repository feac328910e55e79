"""Reading a run: merge its worker files (``merge``), derive caveats and views, and render them
as text, JSON or a comparison. Imports ``lineprofiler.runfile``, never the recording side.
"""
