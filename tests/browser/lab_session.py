"""JupyterLab and Chromium for the browser test (reconstruction §3 sliders, checked in a real browser).

The server listens on 127.0.0.1 only, requires a random token and keeps its configuration, data and
runtime files in throwaway folders. Chromium is the system's own browser, driven by Playwright
through ``executable_path`` (the test never downloads a browser). Every wait is on a condition with
a time limit, never a fixed sleep.
"""
from __future__ import annotations

import base64
import io
import json
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import nbformat
import numpy as np
import psutil
from PIL import Image
from playwright.sync_api import Error as PlaywrightError

# Flags that let Chromium start as root in a container without a GPU, display or network.
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]

# JupyterLab user settings for a test run: no news or update checks (no network, no pop-ups over
# the screenshots), and every cell kept in the page so that text searches see the whole notebook.
LAB_SETTINGS = {
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings":
        {"fetchNews": "false", "checkForUpdates": False},
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
}

WIDGET_ERROR = "Error displaying widget"
TRACEBACK = "Traceback (most recent call last)"
# The status bar's kernel item once a kernel is connected and idle, e.g. "Python 3 (ipykernel) | Idle"
# (the toolbar's execution indicator already says "idle" before any kernel is there).
KERNEL_IDLE = re.compile(r"^(?!No Kernel).+ \| Idle$")


def chromium_executable() -> str | None:
    """The system Chromium (Debian's ``chromium``), or None when it is not installed."""
    return shutil.which("chromium")


def _free_loopback_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def prepare_notebook(source: Path, folder: Path) -> Path:
    """Copy a notebook into ``folder`` without outputs or saved widget state.

    A widget that shows up in the browser then comes from the live kernel, not from the state the
    committed notebook carries.
    """
    nb = nbformat.read(source, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    nb.metadata.pop("widgets", None)
    target = folder / source.name
    nbformat.write(nb, target)
    return target


def write_lab_settings(config_dir: Path) -> None:
    """Write :data:`LAB_SETTINGS` as the user settings under a Jupyter config folder."""
    for name, values in LAB_SETTINGS.items():
        path = config_dir / "lab" / "user-settings" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))


class LabServer:
    """A JupyterLab server serving ``root`` on 127.0.0.1 with a random token.

    The environment (Jupyter folders, ``DLGN_*`` locations) is the caller's ``os.environ``.
    Kernels are started from ``sys.executable``, the interpreter running the tests.
    """

    def __init__(self, root: Path, log_path: Path, start_timeout: float = 90.0):
        self.token = secrets.token_hex(24)
        self.port = _free_loopback_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        command = [sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root",
                   "--ip=127.0.0.1", f"--port={self.port}", "--ServerApp.port_retries=0",
                   f"--IdentityProvider.token={self.token}", f"--ServerApp.root_dir={root}",
                   "--ServerApp.terminals_enabled=False", "--LabApp.news_url=None",
                   "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
        self._log = open(log_path, "wb")
        # Own session: a Ctrl-C meant for pytest does not reach the server, which is stopped (kernels
        # first) by stop() from the fixture's teardown.
        self.process = subprocess.Popen(command, stdout=self._log, stderr=subprocess.STDOUT,
                                        start_new_session=True)
        self._wait_until_ready(start_timeout)

    def log_tail(self, lines: int = 30) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def request(self, path: str, *, token: bool = True, method: str = "GET",
                timeout: float = 10.0) -> tuple[int, str]:
        """Send one HTTP request to the server; returns (status, Location header or "").

        Redirects are not followed, so a redirect to the login page shows as 302.
        """
        class NoRedirect(urllib.request.HTTPRedirectHandler):
            def redirect_request(self, *args, **kwargs):
                return None

        req = urllib.request.Request(f"{self.url}{path}", method=method,
                                     headers={"Authorization": f"token {self.token}"} if token else {})
        try:
            with urllib.request.build_opener(NoRedirect).open(req, timeout=timeout) as response:
                return response.status, response.headers.get("Location", "")
        except urllib.error.HTTPError as exc:
            return exc.code, exc.headers.get("Location", "")

    def _wait_until_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                self.stop()
                raise RuntimeError(f"JupyterLab exited with status {self.process.returncode}:\n{self.log_tail()}")
            try:
                if self.request("/api/status", timeout=2)[0] == 200:
                    return
            except OSError:  # not listening yet
                pass
            time.sleep(0.5)
        self.stop()
        raise TimeoutError(f"JupyterLab did not answer within {timeout:.0f} s:\n{self.log_tail()}")

    def processes(self) -> list[psutil.Process]:
        """The server process and everything it started (kernels), while they run."""
        try:
            server = psutil.Process(self.process.pid)
            return [server, *server.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    def listening_addresses(self) -> set[str]:
        """IP addresses of the server's listening TCP sockets."""
        server = psutil.Process(self.process.pid)
        return {c.laddr.ip for c in server.net_connections(kind="tcp") if c.status == psutil.CONN_LISTEN}

    def stop(self, timeout: float = 20.0) -> list[psutil.Process]:
        """Shut the server and its kernels down; returns the processes still alive afterwards (none).

        Asks the server to shut down (it stops its kernels), then terminates and finally kills
        whatever of the server's process tree is left.
        """
        procs = self.processes()
        if self.process.poll() is None:
            try:
                self.request("/api/shutdown", method="POST", timeout=5)
            except OSError:
                pass
        _, alive = psutil.wait_procs(procs, timeout=timeout)
        for proc in alive:
            proc.terminate()
        _, alive = psutil.wait_procs(alive, timeout=5)
        for proc in alive:
            proc.kill()
        _, alive = psutil.wait_procs(alive, timeout=5)
        self.process.wait(timeout=5)
        self._log.close()
        return alive


def non_loopback_addresses() -> list[str]:
    """This machine's IPv4 addresses outside 127.0.0.0/8."""
    return [a.address for addrs in psutil.net_if_addrs().values() for a in addrs
            if a.family == socket.AF_INET and not a.address.startswith("127.")]


class LabPage:
    """A JupyterLab page in Chromium, with the steps the browser test takes.

    Args:
        page: a Playwright page.
        server: the running :class:`LabServer`.
        shots: folder for the screenshots of each step.
    """

    def __init__(self, page, server: LabServer, shots: Path):
        self.page = page
        self.server = server
        self.shots = shots
        self.name = ""  # the open notebook

    def screenshot(self, name: str, locator=None) -> Path:
        """Save a screenshot of the page (or of one element) as ``<shots>/<name>.png``."""
        path = self.shots / f"{name}.png"
        (locator or self.page).screenshot(path=path)
        return path

    def open_notebook(self, name: str, timeout: float = 60.0) -> None:
        """Open a notebook in Lab (alone: ``reset`` drops earlier tabs) and wait for its idle kernel."""
        self.page.goto(f"{self.server.url}/lab/tree/{name}?reset&token={self.server.token}")
        self.name = name
        self.wait_for_idle_kernel(timeout)

    def wait_for_idle_kernel(self, timeout: float = 60.0) -> None:
        """Wait until the open notebook's kernel is connected and idle (its status bar item says so)."""
        item = self.page.locator(f".jp-StatusBar-TextItem[title='Change kernel for {self.name}']")
        item.filter(has_text=KERNEL_IDLE).wait_for(timeout=timeout * 1000)

    def run_all_cells(self, stem: str, timeout: float = 150.0) -> None:
        """Run every cell through the Run menu, then wait until each code cell has run.

        Screenshots: ``<stem>-2-run-menu`` (the open menu) and ``<stem>-3-ran`` (the page after).
        """
        self.page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
        item = self.page.locator(".lm-Menu-item", has_text=re.compile(r"^Run All Cells"))
        item.wait_for(timeout=10_000)
        self.screenshot(f"{stem}-2-run-menu")
        item.click()
        # Done when every code cell shows its execution count "[n]:" ("[*]:" while queued or
        # running), or when a cell has failed (Lab then leaves the cells after it unrun).
        self.page.wait_for_function(
            """traceback => {
                const prompts = [...document.querySelectorAll('.jp-CodeCell .jp-InputPrompt')];
                const outputs = [...document.querySelectorAll('.jp-OutputArea-output')];
                return (prompts.length > 0 && prompts.every(p => /\\[\\d+\\]/.test(p.textContent)))
                    || outputs.some(o => o.textContent.includes(traceback));
            }""", arg=TRACEBACK, timeout=timeout * 1000, polling=500)
        self.wait_for_idle_kernel(30.0)
        self.screenshot(f"{stem}-3-ran")

    def error_outputs(self) -> list[str]:
        """Texts of error outputs (tracebacks) and of widgets that failed to display."""
        texts = self.page.locator(".jp-OutputArea-output").all_text_contents()
        return [t for t in texts if TRACEBACK in t or WIDGET_ERROR in t]

    def panel(self, descriptions: list[str], timeout: float = 30.0):
        """The widget panel (a VBox) holding sliders with exactly these descriptions and an image."""
        panel = self.page.locator(".jupyter-widgets.widget-vbox")
        for description in descriptions:
            panel = panel.filter(has=self.page.locator(
                ".widget-slider", has=self.page.locator(".widget-label", has_text=re.compile(f"^{re.escape(description)}$"))))
        panel = panel.filter(has=self.page.locator("img")).last
        panel.locator("img").wait_for(timeout=timeout * 1000)
        return panel

    def slider(self, panel, description: str):
        """The slider with this description inside a panel."""
        return panel.locator(".widget-slider").filter(
            has=self.page.locator(".widget-label", has_text=re.compile(f"^{re.escape(description)}$")))

    def press_on_slider(self, slider, key: str) -> None:
        """Focus the slider's handle and press a key, as a keyboard user would."""
        handle = slider.locator(".noUi-handle")
        handle.focus()
        handle.press(key)

    def image(self, panel) -> tuple[str, np.ndarray]:
        """The panel's figure as shown: its ``src`` and its decoded RGBA pixels."""
        img = panel.locator("img")
        src, data_url = img.evaluate(
            """async img => {
                const blob = await (await fetch(img.src)).blob();
                const url = await new Promise(ok => { const r = new FileReader(); r.onload = () => ok(r.result);
                                                     r.readAsDataURL(blob); });
                return [img.src, url];
            }""")
        png = base64.b64decode(data_url.split(",", 1)[1])
        return src, np.asarray(Image.open(io.BytesIO(png)).convert("RGBA"))

    def wait_for_new_image(self, panel, old_src: str, timeout: float = 60.0) -> None:
        """Wait until the panel's image has been replaced (its ``src`` changes on every update).

        Raises:
            AssertionError: the image was not replaced within ``timeout`` seconds.
        """
        try:
            panel.locator("img").evaluate(
                """(img, [old, ms]) => new Promise((ok, fail) => {
                    const t0 = Date.now();
                    const check = () => img.src !== old ? ok() :
                        Date.now() - t0 > ms ? fail(new Error('timeout')) : setTimeout(check, 100);
                    check();
                })""", [old_src, timeout * 1000])
        except PlaywrightError as exc:
            raise AssertionError(f"the figure was not redrawn within {timeout:.0f} s of moving the slider") from exc
