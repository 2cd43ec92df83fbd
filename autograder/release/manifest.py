"""Manifests: the student's `manifest.json` and the instructor-side `release_manifest.json`."""
from __future__ import annotations

import hashlib
import json


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def dumps(obj) -> bytes:
    """Stable JSON: sorted keys, 2-space indent, UTF-8, final newline."""
    return (json.dumps(obj, sort_keys=True, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def student_manifest(assignment: str, version: str, files: dict[str, bytes]) -> bytes:
    """id, version and the sha256 of every student file (names relative to the student folder)."""
    return dumps({"id": assignment, "version": version, "files": {n: sha256(b) for n, b in sorted(files.items())}})


def release_manifest(assignment: str, version: str, sources: dict[str, bytes], generated: dict[str, bytes]) -> bytes:
    """version plus sha256 of the source files and of every generated file (paths relative to the repo root)."""
    return dumps({
        "id": assignment,
        "version": version,
        "sources": {p: sha256(b) for p, b in sorted(sources.items())},
        "generated": {p: sha256(b) for p, b in sorted(generated.items())},
    })
