"""nbval with numbers compared within their measured tolerance (pytest plugin: ``-p tests.nbval_tolerance``).

nbval executes each committed notebook and compares every cell's text outputs with the stored
ones. This plugin keeps nbval's execution, sanitizing and reporting and replaces its final string
equality by :func:`dlgn_lib.record.reproduce.compare_groups`: every word (verdict lines, ``[pass]`` /
``[FAIL]``) must be equal, and every number must lie within the tolerance that
``docs/spread.json`` gives it (reconstruction §7). Nothing is masked: a number outside its
tolerance fails the cell with the number, the line it is on and the allowed difference.
"""
from __future__ import annotations

from nbval import plugin as nbval_plugin

from dlgn_lib import locations

from dlgn_lib.record import reproduce

_RECORD = reproduce.load_record()


def pytest_configure(config):
    def compare_outputs(self, test, ref, skip_compare=None):
        notebook = locations.notebook_id(self.fspath.basename) if locations.NOTEBOOK_NAME.match(self.fspath.basename) else ""
        cell_id = self.cell.get("id", "")
        comparisons = reproduce.compare_groups(reproduce.text_outputs(ref, self.sanitize),
                                               reproduce.text_outputs(test, self.sanitize), _RECORD, notebook, cell_id)
        self.comparison_traceback = [f"{d.kind}: {d.where}: {d.detail}"
                                     for c in comparisons for d in c.differences]
        return not self.comparison_traceback

    nbval_plugin.IPyNbCell.compare_outputs = compare_outputs
