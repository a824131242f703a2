"""Every cited section exists: 'reconstruction §n' points into docs/reconstruction.md, and nothing
cites a document outside the repository."""
import re
import subprocess

import nbformat
import pytest

from dlgn_lib import locations

DOC = locations.REPO_ROOT / "docs" / "reconstruction.md"
TEXT_SUFFIXES = {".py", ".md", ".ipynb", ".cfg", ".toml", ".yml", ".txt", ""}


def tracked_text_files():
    try:
        names = subprocess.run(["git", "ls-files"], cwd=locations.REPO_ROOT, capture_output=True, text=True,
                               check=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    paths = [locations.REPO_ROOT / n for n in names]
    return [p for p in paths if p.is_file() and p.suffix in TEXT_SUFFIXES and "figures" not in p.parts]


def readable_text(path):
    """A notebook's cell sources (not its outputs, whose images are base64 text), other files as they are."""
    if path.suffix == ".ipynb":
        return "\n".join(c.source for c in nbformat.read(path, as_version=4).cells)
    return path.read_text(errors="replace")


def sections():
    return {m.replace("-", ".") for m in re.findall(r'<a id="s(\d+(?:-\d+)?)"></a>', DOC.read_text())}


def test_the_document_has_its_sections():
    assert {"0", "1", "1.1", "2", "2.1", "3", "4", "5", "6", "7", "8"} <= sections()


def test_no_reference_to_a_spec_outside_the_repository():
    offenders = [f"{p.relative_to(locations.REPO_ROOT)}:{i}" for p in tracked_text_files()
                 for i, line in enumerate(readable_text(p).splitlines(), 1)
                 if re.search(r"\b" + "SP" + r"EC\b", line)]   # spelt so that this file passes
    assert offenders == []


def test_every_cited_section_exists():
    known, missing = sections(), []
    for path in tracked_text_files():
        for cited in re.findall(r"reconstruction §(\d+(?:\.\d+)?)", readable_text(path)):
            if cited not in known:
                missing.append(f"{path.relative_to(locations.REPO_ROOT)}: §{cited}")
    assert missing == []
