"""Where the project's files and the shared real data live."""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
# exts/real_is_sim -> repository root (valid for the editable install this project uses).
REPO_ROOT = PACKAGE_DIR.parent.parent
USD_DIR = REPO_ROOT / "usd"


def shared_data_dir() -> Path:
    """The real PushT data set (MIT, Embodied Gaussians release).

    ``$REAL_IS_SIM_DATA`` wins; otherwise ``../shared/data/pusht_real`` beside the checkout.
    The directory may be absent: callers check ``.exists()`` (tests skip with a reason).
    """
    env = os.environ.get("REAL_IS_SIM_DATA")
    if env:
        return Path(env)
    return REPO_ROOT.parent / "shared" / "data" / "pusht_real"
