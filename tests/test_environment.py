"""The three dependency files agree with each other and with the code: pyproject.toml,
environment.yml, requirements.lock, and the imports of dlgn_lib/.

pyproject.toml declares the direct dependencies with exact pins: the runtime ones in
``dependencies``, the test suite's tools in the optional extra ``test`` and the book's (``make
book``) in the extra ``book``. environment.yml (conda
users) must list the same names with the same specs, the extras' included; requirements.lock (the
full pinned set the Makefile installs) must hold a version of each that satisfies its pyproject
spec. Every third-party package that a module of dlgn_lib/ imports must be a runtime dependency.
The checkers return a list of readable problems, and the drift tests feed them deliberately broken
copies to show they catch what they claim to. The sanitize file for nbval is checked here too.
"""
from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

import yaml  # pinned in pyproject.toml's test extra (and a dependency of papermill)
from nbval.plugin import get_sanitize_patterns
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = ROOT / "pyproject.toml"
ENVIRONMENT = ROOT / "environment.yml"
LOCK = ROOT / "requirements.lock"
PACKAGE = ROOT / "dlgn_lib"
MAKEFILE = ROOT / "Makefile"
#: The optional extras of pyproject.toml that environment.yml and the lock must cover too.
EXTRAS = ("test", "book")
#: The tools that belong in each extra, not in the runtime dependencies.
TOOLS = {"test": {"pytest", "nbval", "playwright", "pyyaml"},
         "book": {"sphinx", "myst-nb", "sphinx-book-theme"}}

# conda-forge names that differ from the PyPI ones; everything else is spelled the same.
CONDA_TO_PYPI = {"pytorch": "torch"}
# Conda entries that are the environment's tools rather than the project's dependencies.
CONDA_TOOLING = {"pip"}
LOCK_LINE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([A-Za-z0-9.+!-]+)$")


# Import names whose distribution is spelled differently; any other name is looked up in the
# installed metadata, or else taken as the distribution's own name.
IMPORT_TO_DISTRIBUTION = {"sklearn": "scikit-learn", "yaml": "pyyaml", "PIL": "pillow"}


def _specs(lines: list[str]) -> dict[str, str]:
    specs = {}
    for line in lines:
        requirement = Requirement(line)
        specs[canonicalize_name(requirement.name)] = str(requirement.specifier)
    return specs


def pyproject_requirements(path: Path, extras=EXTRAS) -> tuple[dict[str, str], str, str]:
    """Direct dependencies of a pyproject.toml: ``dependencies`` and those of the named extras.

    Returns:
        ({canonical name: specifier string}, requires-python, project name).
    """
    project = tomllib.loads(path.read_text())["project"]
    specs = _specs(project["dependencies"])
    optional = project.get("optional-dependencies", {})
    for extra in extras:
        specs.update(_specs(optional.get(extra, [])))
    return specs, project["requires-python"], canonicalize_name(project["name"])


def extras_problems(path: Path) -> list[str]:
    """The runtime list and the extras are disjoint, and each extra's tools sit in that extra."""
    project = tomllib.loads(path.read_text())["project"]
    runtime = _specs(project["dependencies"])
    optional = {extra: _specs(lines) for extra, lines in project.get("optional-dependencies", {}).items()}
    problems = [f"pyproject.toml: extra {extra!r} missing" for extra in EXTRAS if extra not in optional]
    for extra, specs in sorted(optional.items()):
        problems += [f"{name}: both a runtime dependency and in extra {extra!r}"
                     for name in sorted(runtime.keys() & specs.keys())]
    for extra, tools in TOOLS.items():
        for name in sorted(tools):
            if name in runtime:
                problems.append(f"{name}: a {extra} tool, declared as a runtime dependency "
                                f"(move it to the {extra} extra)")
            elif name not in optional.get(extra, {}):
                problems.append(f"{name}: a {extra} tool, missing from the {extra} extra")
    return problems


def third_party_imports(package: Path) -> dict[str, set[str]]:
    """Top-level names of the modules that the package's .py files import (at any depth of the
    file, conditional imports included), standard library, relative and own imports left out.

    Returns:
        {import name: {file paths relative to the package's parent}}.
    """
    found: dict[str, set[str]] = {}
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top != package.name and top not in sys.stdlib_module_names:
                    found.setdefault(top, set()).add(str(path.relative_to(package.parent)))
    return found


def distribution_of(import_name: str) -> str:
    """The canonical distribution name of an import name: the known spellings, else the installed
    metadata, else the import name itself."""
    if import_name in IMPORT_TO_DISTRIBUTION:
        return canonicalize_name(IMPORT_TO_DISTRIBUTION[import_name])
    installed = importlib.metadata.packages_distributions().get(import_name, [])
    return canonicalize_name(installed[0] if len(installed) == 1 else import_name)


def undeclared_imports(package: Path, pyproject: Path) -> list[str]:
    """Third-party imports of the package whose distribution is not a runtime dependency."""
    runtime, _, _ = pyproject_requirements(pyproject, extras=())
    problems = []
    for name, files in sorted(third_party_imports(package).items()):
        distribution = distribution_of(name)
        if distribution not in runtime:
            where = ", ".join(sorted(files)[:3]) + (" …" if len(files) > 3 else "")
            problems.append(f"{name} (distribution {distribution}): imported by {where}, "
                            "not in pyproject.toml's dependencies")
    return problems


def conda_requirements(path: Path) -> tuple[dict[str, str], str | None, list[str]]:
    """Dependencies of a conda environment.yml, conda and `pip:` entries alike.

    Returns:
        ({canonical PyPI name: specifier string}, the python version or None, problems).
    """
    specs: dict[str, str] = {}
    python = None
    problems = []

    def add(entry: str, source: str) -> None:
        try:
            requirement = Requirement(entry)
        except InvalidRequirement:
            problems.append(f"environment.yml: cannot read {source} entry {entry!r} (write it as name==version)")
            return
        name = canonicalize_name(CONDA_TO_PYPI.get(requirement.name, requirement.name))
        if name in specs:
            problems.append(f"environment.yml: {name} listed twice")
        specs[name] = str(requirement.specifier)

    for entry in yaml.safe_load(path.read_text())["dependencies"]:
        if isinstance(entry, dict):
            for pip_entry in entry.get("pip", []):
                add(pip_entry, "pip")
        elif entry.split("=")[0].strip() == "python":
            python = entry.split("=", 1)[1].lstrip("=")
        elif entry not in CONDA_TOOLING:
            add(entry, "conda")
    return specs, python, problems


def lock_pins(path: Path) -> tuple[dict[str, str], list[str]]:
    """Pins of requirements.lock as {canonical name: version}, and lines that are not plain pins."""
    pins, problems = {}, []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        match = LOCK_LINE.match(line.strip())
        if match is None:
            # -e lines, file:// or VCS addresses do not install on a fresh machine.
            problems.append(f"requirements.lock:{number}: not a plain name==version pin: {line!r}")
            continue
        name = canonicalize_name(match.group(1))
        if name in pins:
            problems.append(f"requirements.lock:{number}: {name} pinned twice")
        pins[name] = match.group(2)
    return pins, problems


def environment_drift(pyproject: Path, environment: Path) -> list[str]:
    """Differences between pyproject.toml's dependencies and environment.yml's."""
    declared, requires_python, _ = pyproject_requirements(pyproject)
    conda, python, problems = conda_requirements(environment)
    for name in sorted(declared.keys() - conda.keys()):
        problems.append(f"{name}: in pyproject.toml, missing from environment.yml")
    for name in sorted(conda.keys() - declared.keys()):
        problems.append(f"{name}: in environment.yml, missing from pyproject.toml")
    for name in sorted(declared.keys() & conda.keys()):
        if declared[name] != conda[name]:
            problems.append(f"{name}: pyproject.toml says {declared[name]!r}, environment.yml says {conda[name]!r}")
    if python is None:
        problems.append("environment.yml: no python version")
    elif not Requirement(f"python{requires_python}").specifier.contains(Version(python)):
        problems.append(f"environment.yml: python={python} is outside requires-python {requires_python!r}")
    return problems


def lock_drift(pyproject: Path, lock: Path) -> list[str]:
    """Direct dependencies that requirements.lock lacks or pins outside their pyproject spec."""
    declared, _, project = pyproject_requirements(pyproject)
    pins, problems = lock_pins(lock)
    for name, spec in sorted(declared.items()):
        if not spec.startswith("==") or "," in spec:
            problems.append(f"{name}: pyproject.toml spec {spec!r} is not an exact == pin")
        if name not in pins:
            problems.append(f"{name}: in pyproject.toml, missing from requirements.lock")
        elif not Requirement(f"{name}{spec}").specifier.contains(Version(pins[name]), prereleases=True):
            problems.append(f"{name}: requirements.lock pins {pins[name]}, pyproject.toml says {spec!r}")
    if project in pins:
        problems.append(f"requirements.lock pins the project itself ({project})")
    return problems


def test_environment_yml_matches_pyproject():
    assert environment_drift(PYPROJECT, ENVIRONMENT) == []


def test_every_import_of_the_library_is_a_declared_dependency():
    imports = third_party_imports(PACKAGE)
    assert {"torch", "numpy", "sklearn"} <= imports.keys()   # the scan sees the package's imports
    assert undeclared_imports(PACKAGE, PYPROJECT) == []


def test_test_tools_are_an_extra_not_runtime_dependencies():
    assert extras_problems(PYPROJECT) == []


def test_makefile_installs_the_project_with_its_extras():
    [extras] = re.findall(r"pip install --no-deps -e '?\.\[([a-z,]+)\]'?", MAKEFILE.read_text())
    assert sorted(extras.split(",")) == sorted(EXTRAS)


def test_pyproject_pins_match_lock():
    assert lock_drift(PYPROJECT, LOCK) == []


def test_lock_pins_transitive_dependencies_too():
    # The lock is the full set, not a copy of the direct list: torch alone pulls in more.
    declared, _, _ = pyproject_requirements(PYPROJECT)
    pins, _ = lock_pins(LOCK)
    assert len(pins) > len(declared)
    assert {"filelock", "sympy", "jinja2"} <= pins.keys()


def edited(text: str, *replacements: tuple[str, str]) -> str:
    """`text` with each (old, new) replacement made; fails if an `old` is not there."""
    for old, new in replacements:
        assert old in text, f"{old!r} not found: the drift test no longer edits anything"
        text = text.replace(old, new)
    return text


def test_environment_checker_catches_drift(tmp_path):
    copy = tmp_path / "environment.yml"
    copy.write_text(edited(
        ENVIRONMENT.read_text(),
        ("numpy==2.4.6", "numpy==2.4.5"),
        ("torch==2.14.1", "torch>=2.14"),
        ("python=3.11", "python=3.12"),
        ("  - seaborn==", "  # - seaborn=="),
        ("  - pip\n", "  - requests==2.34.2\n  - pip\n"),
    ))

    problems = environment_drift(PYPROJECT, copy)

    assert len(problems) == 5, problems
    assert "numpy: pyproject.toml says '==2.4.6', environment.yml says '==2.4.5'" in problems
    assert "torch: pyproject.toml says '==2.14.1', environment.yml says '>=2.14'" in problems
    assert "seaborn: in pyproject.toml, missing from environment.yml" in problems
    assert "requests: in environment.yml, missing from pyproject.toml" in problems
    assert any("python=3.12" in p for p in problems)


def test_environment_checker_understands_conda_names(tmp_path):
    # Moving torch from the pip list to conda-forge's `pytorch` package is not drift.
    copy = tmp_path / "environment.yml"
    copy.write_text(edited(
        ENVIRONMENT.read_text(),
        ("      - torch==2.14.1", ""),
        ("  - pip\n", "  - pytorch==2.14.1\n  - pip\n"),
    ))
    assert environment_drift(PYPROJECT, copy) == []


def test_lock_checker_catches_drift(tmp_path):
    lines = LOCK.read_text().splitlines()
    drifted = [line for line in lines if not line.startswith("seaborn==")]
    drifted = ["numpy==1.26.0" if line.startswith("numpy==") else line for line in drifted]
    drifted += ["-e file:///somewhere/dlgn-halfspace", "dlgn-halfspace==0.1.0"]
    assert len(drifted) == len(lines) + 1, "the edits above did not all apply"
    copy = tmp_path / "requirements.lock"
    copy.write_text("\n".join(drifted) + "\n")

    problems = lock_drift(PYPROJECT, copy)

    assert len(problems) == 4, problems
    assert "numpy: requirements.lock pins 1.26.0, pyproject.toml says '==2.4.6'" in problems
    assert "seaborn: in pyproject.toml, missing from requirements.lock" in problems
    assert any("not a plain name==version pin" in p and "-e file://" in p for p in problems)
    assert "requirements.lock pins the project itself (dlgn-halfspace)" in problems


def test_lock_checker_flags_loose_pyproject_specs(tmp_path):
    copy = tmp_path / "pyproject.toml"
    copy.write_text(edited(PYPROJECT.read_text(), ('"pandas==3.1.1"', '"pandas>=3"')))
    assert lock_drift(copy, LOCK) == ["pandas: pyproject.toml spec '>=3' is not an exact == pin"]


def test_environment_checker_covers_the_test_extra(tmp_path):
    copy = tmp_path / "environment.yml"
    copy.write_text(edited(ENVIRONMENT.read_text(), ("  - nbval==", "  # - nbval==")))
    assert environment_drift(PYPROJECT, copy) == ["nbval: in pyproject.toml, missing from environment.yml"]


def test_lock_checker_covers_the_test_extra(tmp_path):
    copy = tmp_path / "pyproject.toml"
    copy.write_text(edited(PYPROJECT.read_text(), ('"pytest==9.2.0"', '"pytest==9.1.0"')))
    assert lock_drift(copy, LOCK) == ["pytest: requirements.lock pins 9.2.0, pyproject.toml says '==9.1.0'"]


def test_environment_checker_covers_the_book_extra(tmp_path):
    copy = tmp_path / "environment.yml"
    copy.write_text(edited(ENVIRONMENT.read_text(), ("  - myst-nb==1.4.0", "  - myst-nb==1.3.0")))
    assert environment_drift(PYPROJECT, copy) == [
        "myst-nb: pyproject.toml says '==1.4.0', environment.yml says '==1.3.0'"]


def test_extras_checker_catches_misplaced_tools(tmp_path):
    copy = tmp_path / "pyproject.toml"
    copy.write_text(edited(PYPROJECT.read_text(),
                           ('    "nbval==0.11.0",\n', ""),
                           ('    "torch==2.14.1",\n',
                            '    "torch==2.14.1",\n    "nbval==0.11.0",\n    "numpy==2.4.6",\n'),
                           ('    "pyyaml==6.0.4",\n', '    "pyyaml==6.0.4",\n    "numpy==2.4.6",\n'),
                           ('    "sphinx-book-theme==1.4.0",\n', "")))
    assert extras_problems(copy) == [
        "numpy: both a runtime dependency and in extra 'test'",
        "nbval: a test tool, declared as a runtime dependency (move it to the test extra)",
        "sphinx-book-theme: a book tool, missing from the book extra",
    ]


def test_import_checker_catches_undeclared_and_maps_names(tmp_path):
    package = tmp_path / "toylib"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("import os\nfrom . import sub\nfrom toylib.sub import x\n")
    (package / "sub" / "__init__.py").write_text(
        "from __future__ import annotations\nimport numpy.linalg\nfrom sklearn.datasets import make_moons\n"
        "def f():\n    import yaml\n    try:\n        import requests\n    except ImportError:\n        pass\n")
    assert third_party_imports(package).keys() == {"numpy", "sklearn", "yaml", "requests"}
    assert distribution_of("sklearn") == "scikit-learn" and distribution_of("yaml") == "pyyaml"
    problems = undeclared_imports(package, PYPROJECT)
    # numpy and scikit-learn are runtime dependencies; pyyaml is only in the test extra.
    assert [p.split(" (")[0] for p in problems] == ["requests", "yaml"], problems
    assert "toylib/sub/__init__.py" in problems[0]


def sanitized(text: str) -> str:
    """Apply tests/nbval_sanitize.cfg the way nbval does: each regex in file order."""
    for regex, replace in get_sanitize_patterns((ROOT / "tests" / "nbval_sanitize.cfg").read_text()):
        text = re.sub(regex, replace, text)
    return text


def test_sanitize_normalises_what_varies():
    assert sanitized("<Figure at 0x7f3a2b1c9d50>") == sanitized("<Figure at 0x55d0e4a1b2c0>")
    assert sanitized("loaded run 3f2a, took 1.23 s") == sanitized("loaded run 3f2a, took 12 s")
    assert sanitized("training took 0.8s") == sanitized("training took 41.0s")
    assert sanitized("<Figure size 1598x349 with 20 Axes>") == sanitized("<Figure size 650x519.508 with 20 Axes>")
    assert sanitized("<Figure size 640x700 with 20 Axes>") != sanitized("<Figure size 640x700 with 19 Axes>")
    bar_a = " 45%|████▌     | 9/20 [00:01<00:01,  8.93it/s]"
    bar_b = "100%|██████████| 20/20 [00:03<00:00,  6.10it/s]"
    assert sanitized(f"epochs{bar_a}\ndone") == sanitized(f"epochs{bar_b}\ndone")


def test_sanitize_keeps_deterministic_numbers():
    for line in [
        "max |sum_paths - forward| = 3.1e-12  SUPPORTED",
        "test accuracy 0.9312 ± 0.0041 over 5 seeds",
        "boundary distance 0.087 rad (init 0.412) -> SUPPORTED",
        "regions: 37, epoch 120 of 200, 45% of paths active",
    ]:
        assert sanitized(line) == line
