"""Gym registration of the real-is-sim Isaac Lab tasks (loaded through the ``isaaclab.tasks`` entry point)."""

import gymnasium as gym

gym.register(
    id="RealIsSim-PushT-Franka-v0",
    entry_point=f"{__name__}.pusht_env:PushTEnv",
    disable_env_checker=True,
    kwargs={"env_cfg_entry_point": f"{__name__}.pusht_env_cfg:PushTEnvCfg"},
)

gym.register(
    id="RealIsSim-PushT-Franka-Play-v0",
    entry_point=f"{__name__}.pusht_env:PushTEnv",
    disable_env_checker=True,
    kwargs={"env_cfg_entry_point": f"{__name__}.pusht_env_cfg:PushTEnvCfg_PLAY"},
)
