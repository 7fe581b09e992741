"""The bridge: one configuration tree and one composition root that build the running Real-is-Sim system.

:func:`~real_is_sim.bridge.config.load_bridge_cfg` reads a preset (``standin``: everything on this machine;
``real_cell``: three RealSense cameras and a Franka through franky) with YAML and dotlist overrides;
:func:`~real_is_sim.bridge.compose.build_bridge` wires cameras, sensor, actuator, twin, policy and follower from it;
:class:`~real_is_sim.bridge.session.DeploySession` runs it paced in real time, recorded, and stops cleanly.
"""

from real_is_sim.bridge.compose import Bridge, build_bridge
from real_is_sim.bridge.config import PRESETS, BridgeCfg, load_bridge_cfg

__all__ = ["PRESETS", "Bridge", "BridgeCfg", "build_bridge", "load_bridge_cfg"]
