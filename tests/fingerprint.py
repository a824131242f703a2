"""A folder's fingerprint for tests that must show "nothing was written": every file's SHA-256."""
import hashlib
from pathlib import Path


def tree(folder: Path) -> dict:
    """Every file under ``folder`` (relative path) with the SHA-256 of its bytes; {} if it is absent."""
    folder = Path(folder)
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()} if folder.exists() else {}
