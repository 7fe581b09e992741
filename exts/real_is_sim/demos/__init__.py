"""Demonstrations: episodes recorded at 60 Hz in the LeRobot v3.0 dataset layout, re-rendered and replayed."""

# Collection modes: "offline" the twin alone, "online" the bridge against the stand-in (visual forces on).
MODES = ("offline", "online")
