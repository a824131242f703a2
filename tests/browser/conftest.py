"""Fixtures of the browser test: throwaway folders, a pre-filled run cache, JupyterLab, Chromium.

Without Chromium the test is skipped locally, but fails under CI (``CI=true``): there it must run.
"""
from __future__ import annotations

import os
from pathlib import Path

import psutil
import pytest
from playwright.sync_api import sync_playwright

from dlgn_lib import locations

from dlgn_lib.record import series
from lab_session import CHROMIUM_ARGS, LabPage, LabServer, chromium_executable, prepare_notebook, write_lab_settings


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


@pytest.fixture(scope="module")
def chromium() -> str:
    """Path of the system Chromium; skips (fails under CI) when it is not installed."""
    path = chromium_executable()
    if path is None:
        message = "Chromium is not installed (Debian: apt-get install chromium); the browser test needs it"
        if _in_ci():
            pytest.fail(message)
        pytest.skip(message)
    return path


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """Throwaway folders, exported for this module: Jupyter config/data/runtime, runs, figures.

    Yields their parent folder, which also holds ``served/`` (the folder JupyterLab serves, where
    :func:`notebook` copies notebooks), ``executed/`` (the headless runs) and the server's log.
    """
    base = tmp_path_factory.mktemp("lab")
    folders = {"JUPYTER_CONFIG_DIR": "jupyter-config", "JUPYTER_DATA_DIR": "jupyter-data",
               "JUPYTER_RUNTIME_DIR": "jupyter-runtime", "IPYTHONDIR": "ipython",
               "DLGN_RUNS_DIR": "runs", "DLGN_FIGURES_DIR": "figures"}
    with pytest.MonkeyPatch.context() as mp:
        for variable, name in folders.items():
            (base / name).mkdir()
            mp.setenv(variable, str(base / name))
        write_lab_settings(base / "jupyter-config")
        (base / "served").mkdir()
        (base / "executed").mkdir()
        yield base


@pytest.fixture(scope="module")
def notebook(workspace):
    """``notebook("01_paths.ipynb")``: a clean copy in the served folder, its runs already cached.

    The copy is executed once headlessly (papermill, this interpreter) so that every run it needs
    is in the module's run cache; running it again in Lab then only loads.
    """
    def prepare(name: str) -> str:
        source = locations.REPO_ROOT / "notebooks" / name
        assert source.exists(), f"notebooks/{name} is missing"
        copy = prepare_notebook(source, workspace / "served")
        result = series.run_notebook(copy, workspace / "executed", "quick", series.CURRENT_INTERPRETER_KERNEL)
        assert result.ok, f"{name} failed when run headlessly: {result.error}: {result.message}"
        return copy.name

    return prepare


@pytest.fixture(scope="module")
def lab_server(workspace, chromium):
    """JupyterLab on 127.0.0.1 with a random token; stopped, with its kernels, after the module."""
    server = LabServer(workspace / "served", workspace / "jupyterlab.log")
    try:
        yield server
    finally:
        left = server.stop()
        assert not left, f"processes left after stopping JupyterLab: {left}"


@pytest.fixture(scope="module")
def browser(chromium, workspace, lab_server):
    """A headless Chromium context with a fresh profile; closed, and checked gone, after the module.

    Starts after JupyterLab, so that the processes it adds under this one (the Playwright driver
    and Chromium) are those that are not the server's.
    """
    before = {p.pid for p in psutil.Process().children(recursive=True)}

    def browser_processes():
        server = {p.pid for p in lab_server.processes()}
        return [p for p in psutil.Process().children(recursive=True) if p.pid not in before | server]

    with sync_playwright() as playwright:
        try:
            context = playwright.chromium.launch_persistent_context(
                workspace / "chromium-profile", executable_path=chromium, headless=True, args=CHROMIUM_ARGS,
                viewport={"width": 1280, "height": 1000}, timeout=60_000)
        except Exception as exc:  # a browser that is installed but cannot start is always a failure
            pytest.fail(f"Chromium ({chromium}) did not start: {exc}")
        try:
            yield context
        finally:
            started = browser_processes()
            context.close()
    _, left = psutil.wait_procs(started, timeout=10)
    assert not left, f"browser processes left after closing Chromium: {left}"


@pytest.fixture(scope="module")
def shots() -> Path:
    """Folder of the screenshots: ``build/browser/`` (``DLGN_BUILD_DIR`` moves it)."""
    folder = locations.build_dir() / "browser"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture
def lab(browser, lab_server, shots):
    """A new JupyterLab page; closed after the test."""
    page = browser.new_page()
    page.set_default_timeout(30_000)
    try:
        yield LabPage(page, lab_server, shots)
    finally:
        page.close()
