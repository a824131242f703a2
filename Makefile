# dlgn-halfspace: every command runs in .venv, which `make` creates and keeps in step with
# requirements.lock and pyproject.toml by itself.
#
#   make figures [PROFILE=full] [WORKERS=N]
#                                 run the notebook series headlessly (figures/, build/notebooks/),
#                                 notebooks side by side on a local Dask cluster of N worker
#                                 processes (default: one per core); the one command that writes
#                                 the committed figures/ (a notebook run by hand writes build/figures/)
#   make test                     library tests (test-library, TEST_WORKERS=2 test files at a
#                                 time, TEST_WORKERS=0 one after another), then nbval on the committed
#                                 notebooks (test-notebooks: words exactly, numbers within the
#                                 tolerances of docs/spread.json; NBVAL_WORKERS=2 notebooks at a
#                                 time, NBVAL_WORKERS=0 one after another in this process)
#   make verify [PROFILE=full]    re-run the series into build/verify and compare every verdict,
#                                 number and figure with the record (notebooks/, figures/ untouched)
#   make spread [ADD=1]           run the quick series under several CPU code paths and write
#                                 docs/spread.json, the source of the tolerances (ADD=1: add this
#                                 machine's code paths to the record, e.g. on a second CPU)
#   make lab                      JupyterLab on 127.0.0.1, serving notebooks/ (no solutions there)
#   make student                  the student edition: build/student/ (outputs cleared, no solutions)
#   make solutions [ONLY="01 05"]  regenerate the outputs of teaching/SOLUTIONS.md's snippets
#   make book                     the rendered book of the committed notebooks: build/book/index.html
#                                 (nothing re-executed; sliders as static twins)
#   make slides                   the 90-minute class's deck (reveal.js, offline): build/slides/
#   make bench [SERIES=1] [RECORD=1]  performance benchmarks (reconstruction §6); RECORD=1 writes docs/bench.json
#   make report                   regenerate the README's tables and the notebooks' results blocks
#   make data                     prepare the datasets
#   make lock                     re-pin requirements.lock from .venv as it is now
#                                 (after a `.venv/bin/pip install NAME==VERSION`)
#   make clean                    remove build output and the run cache
#
# Progress bars go quiet when CI=true is in the environment (the library reads it).

# The pinned PyTorch wheels are built for CPython 3.11: the venv step stops at once, before any
# download, when $(PYTHON) is missing or another version (pass PYTHON=/path/to/python3.11).
PYTHON ?= $(shell command -v python3.11 || command -v python3)
PROFILE ?= quick
WORKERS ?=
# Notebooks nbval executes at a time (pytest-xdist; each kernel trains on one torch thread).
NBVAL_WORKERS ?= 2
# Library test files pytest runs at a time (pytest-xdist, --dist loadfile: a file's tests in one process).
TEST_WORKERS ?= 2
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.dlgn-installed.stamp
# Absolute paths: a notebook's kernel runs in notebooks/, where a relative folder would name
# another place than the one make means (and a location variable given relative is made absolute
# for every command below).
BUILD_DIR := $(abspath $(or $(DLGN_BUILD_DIR),build))
RUNS_DIR := $(abspath $(or $(DLGN_RUNS_DIR),$(or $(DLGN_DATA_DIR),data)/runs))
$(foreach v,DLGN_DATA_DIR DLGN_RUNS_DIR DLGN_FIGURES_DIR DLGN_BUILD_DIR,$(if $($(v)),$(eval export $(v) := $(abspath $($(v))))))

.PHONY: venv data figures test test-fast test-library test-notebooks verify spread lab bench report student solutions book slides lock clean check-profile

venv: $(STAMP)

# Re-installs whenever the lock or the project metadata changes. The lock pins every package,
# the test and book tools included; the project itself goes in with its `test` and `book` extras, so
# `make test` and `make book` have them.
$(STAMP): requirements.lock pyproject.toml
	@test -x $(PY) || { test -n "$(PYTHON)" && "$(PYTHON)" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' 2>/dev/null; } || \
	  { echo "error: dlgn-halfspace needs Python 3.11 (its pinned PyTorch wheels are built for CPython 3.11);" \
	    "found: $(if $(PYTHON),$(PYTHON) = $$("$(PYTHON)" --version 2>&1),no python3.11 or python3 on PATH)." \
	    "Install Python 3.11 or run: make PYTHON=/path/to/python3.11 ... (other platforms: see README, Install)" >&2; exit 2; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -r requirements.lock
	$(PY) -m pip install --no-deps -e '.[test,book]'
	touch $@

data: venv
	$(PY) -m dlgn_lib.data prepare

# The profile is checked before anything is installed or prepared. Only this target names the
# committed figures/ (DLGN_FIGURES_DIR, unless already set): elsewhere figures go to build/figures.
FIGURES_DIR := $(or $(DLGN_FIGURES_DIR),$(CURDIR)/figures)
figures: check-profile venv data
	DLGN_FIGURES_DIR=$(FIGURES_DIR) \
	  $(PY) -m dlgn_lib.record.series run --profile $(PROFILE) $(if $(WORKERS),--workers $(WORKERS))

# Two runs, both must pass: the library tests (tests/, every subfolder included), then the
# committed notebook outputs, compared by tests/nbval_tolerance.py: words exactly, numbers within
# their measured tolerance. Figures go to build/test-figures, so that figures/ is never touched.
# nbval runs NBVAL_WORKERS notebooks side by side (--dist loadscope keeps each notebook's cells in
# order in one kernel); runs two notebooks share are trained once (the run cache locks each entry).
# pytest's "no tests collected" (exit 5) counts as a failure.
# Another CPU code path for the notebooks alone, e.g. (as .ci/run does):
#   DLGN_NUMERICS=native make test-notebooks
test: test-library test-notebooks

test-library: venv data
	$(PY) -m pytest tests -n $(TEST_WORKERS) --dist loadfile

# The science and presentation tests only (tests/conftest.py marks each file by its imports).
test-fast: venv data
	$(PY) -m pytest tests -m "science or presentation"

test-notebooks: venv data
	rm -rf $(BUILD_DIR)/test-figures
	$(PY) -c 'import dlgn_lib; print(dlgn_lib.numerics.describe())'
	DLGN_FIGURES_DIR=$(BUILD_DIR)/test-figures \
	  $(PY) -m pytest -p tests.nbval_tolerance --nbval --nbval-current-env \
	  --nbval-sanitize-with tests/nbval_sanitize.cfg -n $(NBVAL_WORKERS) --dist loadscope notebooks/

verify: check-profile venv data
	$(PY) -m dlgn_lib.record.reproduce verify --profile $(PROFILE) $(if $(WORKERS),--workers $(WORKERS))

spread: venv data
	$(PY) -m dlgn_lib.record.reproduce spread $(if $(WORKERS),--workers $(WORKERS)) $(if $(ADD),--add --variants pinned native)

# As root (containers, CI machines) JupyterLab refuses to start without --allow-root.
lab: venv
	$(VENV)/bin/jupyter lab --ip=127.0.0.1 --ServerApp.root_dir=notebooks $(if $(filter 0,$(shell id -u)),--allow-root)

bench: venv
	$(PY) -m dlgn_lib.record.bench $(if $(SERIES),--series) $(if $(RECORD),--record)

# The README's tables, the course guide's timing table and each notebook's results block, from the
# committed notebooks and docs/full_results.json (after re-executing notebooks; `make test` checks).
report: venv
	$(PY) -m dlgn_lib.record.report write

# Notebooks with outputs and results cleared, exercises kept; solutions stay in teaching/.
student: venv
	$(PY) -m dlgn_lib.record.student $(BUILD_DIR)/student

# The worked solutions' outputs in teaching/SOLUTIONS.md, regenerated (each notebook, quick, with its
# snippets appended); ONLY="01 05" for some notebooks. `make test` checks the file against them.
solutions: venv data
	$(PY) -m dlgn_lib.record.solutions run $(if $(ONLY),--only $(ONLY))

# Sphinx + myst-nb over the committed outputs (docs/book/build.py; sources staged in build/book-src).
book: venv
	$(PY) docs/book/build.py $(BUILD_DIR)/book

# The 90-minute class's deck, written from teaching/class_deck/ with the committed figures and the
# record's verdict lines (dlgn_lib.record.slides; reveal.js and MathJax from verified npm tarballs).
slides: venv
	$(PY) -m dlgn_lib.record.slides --out $(BUILD_DIR)/slides

check-profile:
	@case "$(PROFILE)" in quick|full) ;; \
	  *) echo "error: PROFILE=$(PROFILE) is not a profile; use PROFILE=quick or PROFILE=full" >&2; exit 2;; esac

lock:
	{ echo "# Every package of the environment, pinned (Linux x86_64, CPython 3.11). Regenerate with: make lock"; \
	  $(PY) -m pip freeze --all --exclude pip --exclude-editable --exclude dlgn-halfspace; } > requirements.lock.tmp
	mv requirements.lock.tmp requirements.lock
	touch $(STAMP)  # the lock now describes .venv exactly: no reinstall needed

clean:
	rm -rf $(BUILD_DIR) $(RUNS_DIR)
