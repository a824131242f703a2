"""Sphinx configuration of the rendered book of the executed series (``make book``).

The book is Sphinx with myst-nb and sphinx-book-theme, configured here directly, rather than
Jupyter Book 1.x: Jupyter Book 1.x wraps these same three pieces but, next to the packages pinned
in requirements.lock, would pull in an older Sphinx (7.4), myst-parser (3.0) and docutils and a
dozen extensions the book does not use (bibtex, thebe, comments, external TOC, LaTeX helpers,
...), while the settings that matter here are plain myst-nb options: notebooks are rendered from
their committed outputs and never executed, ``text/html`` outranks the widget view (so a panel's
static twin from dlgn_lib.widgets is shown, not an empty widget area), and no ipywidgets
JavaScript is loaded from a CDN (there is no live widget to drive).

docs/book/build.py stages this file, the front page it generates and copies of the notebooks into
one source folder, then runs ``sphinx-build`` on it.
"""
project = "Half-Space Feature Learning in Neural Networks: the executed series"
author = "dlgn-halfspace"
copyright = "2026, the dlgn-halfspace authors (MIT licence); the paper: Yadav, Ramaswamy, Lakshminarayanan, 2024"

# MathJax is copied into the book (sphinx-mathjax-offline) instead of loaded from a CDN, so the
# formulas render with no network, like everything else in it.
extensions = ["myst_nb", "sphinx-mathjax-offline"]
exclude_patterns = ["_build", ".doctrees", "**.ipynb_checkpoints"]
myst_enable_extensions = ["dollarmath"]
# Links to a page's headings (README-style "guide.md#reliability") resolve in the book too.
myst_heading_anchors = 3

# Committed outputs only: nothing runs, nothing is cached.
nb_execution_mode = "off"
# A panel's display holds the widget view and its static twin (text/html); myst-nb ranks the
# widget view first (10) by default: put text/html (30 by default) before it.
nb_mime_priority_overrides = [("html", "text/html", 5)]
# No widget manager from a CDN: the static twins need none (build.py also drops saved widget state).
nb_ipywidgets_js = {}

html_theme = "sphinx_book_theme"
html_title = "Half-Space Feature Learning: the executed series"
html_static_path = ["_static"]
html_css_files = ["book.css"]
# Figures open at full size on click.
html_js_files = ["book.js"]
html_theme_options = {"show_toc_level": 1}
# The figures have white backgrounds; an explicit mode also keeps the theme's script from logging
# "invalid theme mode" on a first visit.
html_context = {"default_mode": "light"}
# The download button ships each page's notebook (the staged copy: committed outputs, no saved
# widget state) as _sources/notebooks/NN_name.ipynb, under its own name, not with a ".txt" suffix.
html_show_sourcelink = False
html_copy_source = True
html_sourcelink_suffix = ""
