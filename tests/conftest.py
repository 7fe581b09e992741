import pytest
import torch

from real_is_sim.paths import shared_data_dir

# The tensors here are small: on a loaded 2-core machine torch's thread pool costs far more than it saves.
torch.set_num_threads(1)


@pytest.fixture(scope="session")
def shared_data():
    """Path to ../shared/data/pusht_real; skips the test when the real data is absent."""
    path = shared_data_dir()
    if not (path / "objects" / "tblock.json").exists():
        pytest.skip(f"real PushT data not found at {path} (set REAL_IS_SIM_DATA or place ../shared/data)")
    return path
