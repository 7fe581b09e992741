"""Load dataclass configs from YAML with omegaconf overrides, failing with one clear message."""

from __future__ import annotations

from dataclasses import is_dataclass
from pathlib import Path
from typing import Any, Sequence, TypeVar

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from real_is_sim.errors import ConfigError

T = TypeVar("T")


def load_config(cls: type[T], source: str | Path | dict | None = None, overrides: Sequence[str] = ()) -> T:
    """Build ``cls`` from its defaults, then a YAML file or dict, then dotlist overrides (``a.b=1``).

    Unknown keys, wrong types and unreadable YAML all raise :class:`ConfigError` naming the problem.
    The dataclass's ``__post_init__`` validation runs on the result.
    """
    if not is_dataclass(cls):
        raise TypeError(f"{cls!r} is not a dataclass")
    try:
        schema = OmegaConf.structured(cls)
        layers = [schema]
        if isinstance(source, (str, Path)):
            path = Path(source)
            if not path.is_file():
                raise ConfigError(f"config file not found: {path}")
            try:
                loaded = OmegaConf.load(path)
            except Exception as exc:  # yaml.YAMLError and friends
                raise ConfigError(f"config file {path} is not valid YAML: {exc}") from None
            if not isinstance(loaded, type(schema)):
                raise ConfigError(f"config file {path} must hold a mapping at its top level")
            layers.append(loaded)
        elif isinstance(source, dict):
            layers.append(OmegaConf.create(source))
        elif source is not None:
            raise ConfigError(f"config source must be a path or a dict, got {type(source).__name__}")
        if overrides:
            layers.append(OmegaConf.from_dotlist(list(overrides)))
        merged = OmegaConf.merge(*layers)
        return OmegaConf.to_object(merged)
    except ConfigError:
        raise
    except OmegaConfBaseException as exc:
        where = f" in {source}" if isinstance(source, (str, Path)) else ""
        key = f"{exc.full_key}: " if getattr(exc, "full_key", None) else ""
        raise ConfigError(f"invalid {cls.__name__} config{where}: {key}{_first_line(exc)}") from None
    except (ValueError, TypeError) as exc:  # raised by __post_init__ validation
        raise ConfigError(f"invalid {cls.__name__} config: {exc}") from None


def to_yaml(cfg: Any) -> str:
    return OmegaConf.to_yaml(OmegaConf.structured(cfg))


def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
