"""Files the local run writes that hold secrets (keys, client secrets, the plan)."""

from __future__ import annotations

import os
from pathlib import Path


def write_private(path: Path, data: str | bytes) -> None:
    """Write ``data`` to ``path`` (creating its folder), readable and writable by this
    user only: the mode is set at creation, so the content is never visible to others."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data.encode("utf-8") if isinstance(data, str) else data)
