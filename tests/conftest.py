"""Library tests measure throw-away runs: they keep no tables in the analysis cache of the user's
run cache (dlgn_lib.memo; tests/test_memo.py turns it on in a folder of its own)."""
import os

os.environ.setdefault("DLGN_ANALYSIS_CACHE", "off")
