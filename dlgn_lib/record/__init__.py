"""The record tools, on top of the science and the presentation (README "Where things live"): the
series runner (``series``), the documents generated from executed notebooks (``report``, with
``full_results``, ``readme_blocks``, ``guide_blocks`` and ``notebook_blocks``), the spread, verify
and outputs commands (``reproduce``), the benchmark (``bench``), run bundles (``bundle``), the
class walk (``classwalk``), the solutions, student copies and slides, the audit of rule
registrations (``audit``), and the Dask cluster the series runs on (``dask_cluster``). Nothing
below this package imports from it (tests/test_layers.py)."""

__all__: list[str] = []
