"""Byte-reproducible zip files: sorted entries, fixed timestamps and permissions, fixed compression."""
from __future__ import annotations

import io
import zipfile

EPOCH = (1980, 1, 1, 0, 0, 0)  # the earliest time a zip entry can hold
EXECUTABLE = 0o755
REGULAR = 0o644


def build(files: dict[str, bytes], executables: set[str] = frozenset()) -> bytes:
    """A zip of `files` (archive path -> bytes); paths in `executables` get mode 0755."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name in sorted(files):
            info = zipfile.ZipInfo(name, date_time=EPOCH)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.create_system = 3  # unix, so the mode bits below are honoured by unzip
            info.external_attr = (0o100000 | (EXECUTABLE if name in executables else REGULAR)) << 16
            archive.writestr(info, files[name], compress_type=zipfile.ZIP_DEFLATED, compresslevel=9)
    return buffer.getvalue()


def read(data: bytes) -> dict[str, bytes]:
    """Archive path -> bytes of every file in a zip."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return {info.filename: archive.read(info) for info in archive.infolist() if not info.is_dir()}
