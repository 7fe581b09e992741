"""Camera-layer figures (replay decode rate, random access, recorder encode cost): `python scripts/bench_cameras.py`."""

from real_is_sim.cameras.benchmark import main

if __name__ == "__main__":
    main()
