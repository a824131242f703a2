"""README is an introduction (issue: a lighter read): at most 3,000 words, one generated table of
bottom lines (and the layers' counts), every term defined where it is first used, the record and
the guide linked."""
import re

from dlgn_lib import locations
from dlgn_lib.record import full_results, report

README = (locations.REPO_ROOT / "README.md").read_text()
#: Terms a first reader meets, and the bold text that defines each.
TERMS = {"DLGN": "Deep Linearly Gated Network (DLGN)", "DLN": "DLN", "ReLU net": "ReLU net",
         "frozen-gate": "frozen-gate\nDLGN", "odt": "odt", "SD-I": "SD-I", "SMOKE TEST": "SMOKE TEST",
         "`full`": "`full` profile", "`quick`": "`quick` profile", "HOLDS IN PART": "HOLDS IN\nPART (k of n)"}


def _prose() -> str:
    """README without its generated blocks and code blocks."""
    text = re.sub(r"<!-- report:(\w+) -->.*?<!-- /report:\1 -->", "", README, flags=re.S)
    return re.sub(r"```.*?```", "", text, flags=re.S)


def test_readme_is_at_most_3000_words():
    assert len(README.split()) <= 3000, len(README.split())


def test_readme_has_no_generated_block_but_the_bottom_lines_and_the_layers():
    assert re.findall(r"<!-- report:(\w+) -->", README) == ["bottom", "layers"]
    assert "](docs/record.md)" in README and "](docs/guide.md" in README


def test_every_term_is_defined_in_bold_at_its_first_use_after_the_table():
    prose = _prose()
    for term, definition in TERMS.items():
        bold = prose.find(f"**{definition}**")
        assert bold >= 0, f"{term}: no bold definition **{definition}**"
        first = re.search(r"(?<![\w-])" + r"\s+".join(map(re.escape, term.split())) + r"(?![\w-])", prose)
        assert first is not None and bold <= first.start() <= bold + len(definition) + 4, \
            f"{term} is used before its definition: {prose[first.start() - 60:first.start() + 20]!r}"


def test_each_claim_has_one_wording_used_by_every_table():
    data = full_results.measured()
    record = full_results.full_record()
    texts = {path: text for path, text in report.generated().items() if path.suffix == ".md"}
    for claim, wording, _ in full_results.CLAIMS:
        if claim.startswith("C"):
            assert f"{claim}: {wording}" in texts[report.README]
            assert f"| {claim} | {wording} |" in texts[report.RECORD_PAGE]
    assert data and record
