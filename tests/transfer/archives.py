"""Archives for the transfer tests: the upstream-written fixture, and archives rewritten from it
(an entry replaced, added or dropped) or made from nothing."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path
from typing import Any

UPSTREAM_FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "upstream-1.1.0-bank.zip"


def upstream_archive() -> bytes:
    return UPSTREAM_FIXTURE.read_bytes()


def rewritten(archive: bytes, changes: dict[str, Any]) -> bytes:
    """``archive`` with each named entry replaced (bytes, or a value written as JSON), added, or
    dropped (None)."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(archive)) as source, \
            zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target:
        for name in source.namelist():
            if name not in changes:
                target.writestr(name, source.read(name))
        for name, value in changes.items():
            if value is None:
                continue
            data = value if isinstance(value, bytes) else json.dumps(value).encode()
            target.writestr(name, data)
    return out.getvalue()


def entry(archive: bytes, name: str) -> Any:
    with zipfile.ZipFile(io.BytesIO(archive)) as source:
        return json.loads(source.read(name))


def zip_of(entries: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target:
        for name, data in entries.items():
            target.writestr(name, data)
    return out.getvalue()
