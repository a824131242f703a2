"""Files written so that a failure leaves the old one whole, and command lines that answer a
user's mistake with one line.

Every record the package keeps (``docs/full_results.json``, ``docs/spread.json``, SOLUTIONS.md,
series.json, the generated documents, figures and tables) is written by :func:`write_atomic`: a
temporary file in the same folder, fsync, rename. A full disk, a read-only folder or Ctrl-C leaves
the old file byte for byte and no temporary behind.

Every command-line tool's ``main`` is wrapped by :func:`command`. A :class:`Refusal` (bad input, a
file where a folder should be, a bad environment variable, a write that failed) becomes one line,
``<command>: error: <message>``, and exit code 1; Ctrl-C becomes one line and exit code 130.
Inputs are read with :func:`read_json` and :func:`env_int`/:func:`env_float`/:func:`env_choice`, whose
refusals name the file or the variable and what is allowed.
"""
from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from . import locations

__all__ = ["Interrupted", "Refusal", "check_writable_folder", "command", "env_choice", "env_float", "env_int",
           "environment", "read_json", "temporary_path", "write_atomic", "writable_folder"]


class Refusal(Exception):
    """A refused input or a failed write: one line naming the file (or variable) and the reason."""

    exit_code = 1


class Interrupted(Refusal):
    """Ctrl-C, with what finished and what to rerun (exit code 130)."""

    exit_code = 130


def _shown(path: Path | str) -> str:
    return locations.display_path(path)


def _nearest_folder(folder: Path) -> Path:
    """The nearest of ``folder`` and its parents that exists; a :class:`Refusal` when that is a file."""
    existing = next(path for path in (folder, *folder.parents) if path.exists())
    if not existing.is_dir():
        raise Refusal(f"{_shown(existing)} is a file, not a folder")
    return existing


def writable_folder(folder: Path | str, *, create: bool = True) -> Path:
    """``folder``, made if missing (``create``); a :class:`Refusal` when it is a file or cannot be made."""
    folder = Path(folder)
    _nearest_folder(folder)
    if not folder.exists():
        if not create:
            raise Refusal(f"{_shown(folder)} does not exist")
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise Refusal(f"cannot make the folder {_shown(folder)}: {err.strerror or err}") from None
    return folder


def check_writable_folder(folder: Path | str) -> Path:
    """``folder`` when it is, or can be made (nothing is made), a folder one can write in; else a :class:`Refusal`."""
    folder = Path(folder)
    existing = _nearest_folder(folder)
    if not os.access(existing, os.W_OK | os.X_OK):
        raise Refusal(f"{_shown(existing)} is read-only")
    return folder


@contextlib.contextmanager
def environment(**values: str) -> Iterator[None]:
    """Set environment variables for the block (a child process started in it inherits them); then
    each is restored, or removed where it was not set before."""
    before = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextlib.contextmanager
def temporary_path(path: Path | str) -> Iterator[Path]:
    """A temporary file's path beside ``path``, renamed over it when the block ends without error and
    removed on any error (Ctrl-C included); a failed write or rename is a :class:`Refusal`."""
    path = Path(path)
    if path.is_dir():
        raise Refusal(f"{_shown(path)} is a folder, not a file")
    writable_folder(path.parent)
    try:
        handle, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as err:
        raise Refusal(f"cannot write {_shown(path)}: {err.strerror or err}") from None
    os.close(handle)
    tmp = Path(name)
    try:
        yield tmp
        mode = path.stat().st_mode & 0o777 if path.exists() else 0o666 & ~locations.UMASK
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except OSError as err:
        raise Refusal(f"cannot write {_shown(path)}: {err.strerror or err}; it is unchanged") from None
    finally:
        tmp.unlink(missing_ok=True)


def write_atomic(path: Path | str, content: str | bytes) -> Path:
    """Write ``content`` (text as UTF-8) to ``path`` atomically: temporary file, fsync, rename."""
    data = content.encode() if isinstance(content, str) else content
    with temporary_path(path) as tmp:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
    return Path(path)


def read_json(path: Path | str, kind: type = dict, what: str = "") -> Any:
    """The JSON in ``path``; a :class:`Refusal` naming the file when it is missing, a folder, not
    JSON, or not a ``kind`` (``what`` says what the file should be)."""
    path, about = Path(path), f" ({what})" if what else ""
    if not path.exists():
        raise Refusal(f"{_shown(path)} is missing{about}")
    if path.is_dir():
        raise Refusal(f"{_shown(path)} is a folder, not a file{about}")
    try:
        value = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise Refusal(f"{_shown(path)} is not valid JSON{about}: {err.msg} at line {err.lineno}") from None
    except (OSError, UnicodeDecodeError) as err:
        raise Refusal(f"cannot read {_shown(path)}{about}: {getattr(err, 'strerror', None) or err}") from None
    if not isinstance(value, kind):
        raise Refusal(f"{_shown(path)} holds a JSON {type(value).__name__}, not a {kind.__name__}{about}")
    return value


def _env(name: str, default: Any, parse: Callable[[str], Any], allowed: str, environ=None) -> Any:
    raw = (os.environ if environ is None else environ).get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return parse(raw.strip())
    except ValueError:
        raise Refusal(f"{name}={raw!r} is not allowed; use {allowed} (default {default})") from None


def env_int(name: str, default: int, minimum: int = 1, environ=None) -> int:
    """An integer ≥ ``minimum`` from the environment variable ``name`` (ASCII digits only)."""
    def parse(raw):
        if not re.fullmatch(r"[0-9]+", raw) or int(raw) < minimum:
            raise ValueError(raw)
        return int(raw)
    return _env(name, default, parse, f"a whole number ≥ {minimum}", environ)


def env_float(name: str, default: float, minimum: float = 0.0, environ=None) -> float:
    """A number ≥ ``minimum`` (seconds, say) from the environment variable ``name``."""
    def parse(raw):
        if not re.fullmatch(r"[0-9]*\.?[0-9]+(e[-+]?[0-9]+)?", raw, re.I) or float(raw) < minimum:
            raise ValueError(raw)
        return float(raw)
    return _env(name, default, parse, f"a number ≥ {minimum:g}", environ)


def env_choice(name: str, default: str, choices: tuple[str, ...], environ=None) -> str:
    """One of ``choices`` from the environment variable ``name``."""
    def parse(raw):
        if raw not in choices:
            raise ValueError(raw)
        return raw
    return _env(name, default, parse, f"one of {', '.join(choices)}", environ)


def command(main: Callable[..., int | None]) -> Callable[..., int]:
    """Wrap a command line's ``main(argv)``: a :class:`Refusal` or an ``OSError`` becomes one line on
    stderr and exit code 1, Ctrl-C one line and 130; nothing else is caught."""
    @functools.wraps(main)
    def wrapped(argv=None) -> int:
        module = main.__module__
        if module == "__main__":   # run as ``python -m dlgn_lib.X``: its spec names the module
            spec = getattr(sys.modules["__main__"], "__spec__", None)
            module = spec.name if spec is not None else module
        prog = "python -m " + module
        try:
            return main(argv) or 0
        except Refusal as err:
            print(f"{prog}: error: {err}", file=sys.stderr)
            return err.exit_code
        except KeyboardInterrupt as err:
            said = f": {err}" if str(err) else "; what it wrote before is whole, rerun the same command"
            print(f"{prog}: interrupted{said}", file=sys.stderr)
            return 130
        except OSError as err:
            where = f"{_shown(err.filename)}: " if err.filename else ""
            print(f"{prog}: error: {where}{err.strerror or err}", file=sys.stderr)
            return 1

    wrapped.is_command = True
    return wrapped
