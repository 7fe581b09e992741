"""One checkpoint file: policy config, training config, both normalisers, weights (and their moving average when
training keeps one), optimiser and RNG state."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import torch

from real_is_sim.errors import DataError, RealIsSimError
from real_is_sim.policy.config import PolicyCfg, TrainCfg
from real_is_sim.policy.flow import FlowPolicy
from real_is_sim.policy.normalizer import Normalizer

FORMAT = "real_is_sim.policy/1"
REQUIRED = ("format", "policy_cfg", "train_cfg", "action_norm", "state_norm", "model", "step")


def save_checkpoint(path: str | Path, policy: FlowPolicy, train_cfg: TrainCfg, step: int, *,
                    optimizer: torch.optim.Optimizer | None = None, generator: torch.Generator | None = None,
                    losses: list[float] | None = None, dataset: str = "", ema: dict | None = None) -> Path:
    """Written to a temporary file and renamed: a run killed while saving leaves the previous checkpoint whole.
    ``ema``: the moving average of the weights (a state dict of the policy), which inference then uses."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    state = {
        "format": FORMAT, "policy_cfg": dataclasses.asdict(policy.cfg), "train_cfg": dataclasses.asdict(train_cfg),
        "action_norm": policy.action_norm.state_dict(), "state_norm": policy.state_norm.state_dict(),
        "model": policy.state_dict(), "ema": ema, "step": int(step), "dataset": str(dataset),
        "optimizer": optimizer.state_dict() if optimizer is not None else None,
        "generator": generator.get_state() if generator is not None else None,
        "losses": torch.tensor(losses or [], dtype=torch.float64),
    }
    tmp = path.with_name(path.name + ".tmp")
    torch.save(state, tmp)
    os.replace(tmp, path)
    return path


def read_checkpoint(path: str | Path) -> dict:
    """The raw checkpoint dict, checked for the fields every checkpoint has."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"policy checkpoint not found: {path}")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # pickle, zip and torch errors alike: the file is not a checkpoint
        raise DataError(f"{path} is not a readable policy checkpoint: {type(exc).__name__}: {str(exc)[:120]}") from None
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise DataError(f"{path} is not a policy checkpoint of format {FORMAT}")
    missing = [k for k in REQUIRED if k not in state]
    if missing:
        raise DataError(f"policy checkpoint {path} lacks {', '.join(missing)}")
    return state


def load_checkpoint(path: str | Path) -> tuple[FlowPolicy, dict]:
    """(policy in eval mode, the raw checkpoint dict); the weights are the moving average when the checkpoint has one."""
    state = read_checkpoint(path)
    try:
        cfg = PolicyCfg(**state["policy_cfg"])
        policy = FlowPolicy(cfg, Normalizer.from_state_dict(state["action_norm"]),
                            Normalizer.from_state_dict(state["state_norm"]))
        policy.load_state_dict(state["ema"] if state.get("ema") is not None else state["model"])
    except RealIsSimError as exc:
        raise DataError(f"policy checkpoint {path}: {exc}") from None
    except (TypeError, KeyError, RuntimeError) as exc:  # unknown config keys, wrong tensor shapes
        detail = " ".join(str(exc).split())[:240]
        raise DataError(f"policy checkpoint {path} does not match the policy network: {detail}") from None
    policy.eval()
    return policy, state
