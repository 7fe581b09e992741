"""Demonstrations: episodes recorded at 60 Hz in the LeRobot v3.0 dataset layout, re-rendered and replayed."""
