import pytest

from real_is_sim.paths import shared_data_dir


@pytest.fixture(scope="session")
def shared_data():
    """Path to ../shared/data/pusht_real; skips the test when the real data is absent."""
    path = shared_data_dir()
    if not (path / "objects" / "tblock.json").exists():
        pytest.skip(f"real PushT data not found at {path} (set REAL_IS_SIM_DATA or place ../shared/data)")
    return path
