"""Errors raised on bad input. Each names the problem in one sentence."""


class RealIsSimError(Exception):
    """Base class of every error this package raises on bad input."""


class ConfigError(RealIsSimError, ValueError):
    """A configuration file or override is malformed or has an invalid value."""


class DataError(RealIsSimError, ValueError):
    """A data file (object, camera, video, calibration) is missing, malformed or inconsistent."""
