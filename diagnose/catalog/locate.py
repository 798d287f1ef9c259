"""Where the rule catalog and playbooks live (source checkout or installed wheel)."""

from __future__ import annotations

import os
from pathlib import Path


def catalog_root() -> Path:
    """Folder holding ``rules/`` and ``playbooks/``.

    ``DIAGNOSE_CATALOG`` overrides; an installed wheel carries them in ``diagnose/_catalog``;
    a source checkout has them beside the package.
    """
    env = os.environ.get("DIAGNOSE_CATALOG")
    if env:
        return Path(env)
    pkg = Path(__file__).resolve().parent.parent
    bundled = pkg / "_catalog"
    if (bundled / "rules").is_dir():
        return bundled
    return pkg.parent
