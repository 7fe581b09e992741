"""FrameSynchronizer and the camera data types, on synthetic frames."""

import math

import numpy as np
import pytest

from real_is_sim.cameras import CameraInfo, Frame, FrameSynchronizer
from real_is_sim.errors import DataError


def frame(serial, t, index):
    return Frame(serial, np.full((4, 6, 3), index, np.uint8), t, index)


def test_tick_picks_newest_frame_not_after_the_tick():
    sync = FrameSynchronizer(["a", "b"], stale_after=0.05)
    sync.push([frame("a", 0.010, 0), frame("a", 0.020, 1), frame("a", 0.040, 2), frame("b", 0.015, 0)])
    tick = sync.tick(1 / 60)
    assert tick.samples["a"].frame.index == 0  # 0.020 and 0.040 lie after the tick
    assert tick.samples["b"].frame.index == 0
    assert tick.samples["a"].age == pytest.approx(1 / 60 - 0.010)
    assert tick.complete
    tick = sync.tick(2 / 60)
    assert tick.samples["a"].frame.index == 1
    assert tick.samples["a"].age == pytest.approx(2 / 60 - 0.020)


def test_stale_and_missing_cameras_are_marked_not_waited_for():
    sync = FrameSynchronizer(["a", "b", "c"], stale_after=0.05)
    sync.push([frame("a", 1.00, 0), frame("b", 0.90, 0)])
    tick = sync.tick(1.01)
    assert list(tick.fresh) == ["a"]
    assert tick.stale == ["b"] and tick.missing == ["c"]
    assert tick.samples["b"].frame.index == 0 and tick.samples["b"].stale
    assert math.isinf(tick.samples["c"].age) and tick.samples["c"].missing
    assert not tick.complete
    # b recovers as soon as a new frame arrives.
    sync.push([frame("b", 1.02, 1)])
    assert "b" in sync.tick(1.03).fresh


def test_late_or_duplicate_frames_never_replace_a_newer_one():
    sync = FrameSynchronizer(["a"])
    sync.push([frame("a", 0.5, 5)])
    sync.tick(0.5)
    sync.push([frame("a", 0.4, 4), frame("a", 0.5, 5)])
    assert sync.tick(0.6).samples["a"].frame.index == 5


def test_unknown_camera_and_bad_threshold_raise():
    sync = FrameSynchronizer(["a"])
    with pytest.raises(DataError, match="camera z"):
        sync.push([frame("z", 0.0, 0)])
    with pytest.raises(DataError, match="stale_after"):
        FrameSynchronizer(["a"], stale_after=float("nan"))
    with pytest.raises(DataError, match="at least one"):
        FrameSynchronizer([])


def test_frame_and_camera_info_validate_their_input():
    with pytest.raises(DataError, match="uint8"):
        Frame("a", np.zeros((4, 6, 3), np.float32), 0.0, 0)
    with pytest.raises(DataError, match="HxWx3"):
        Frame("a", np.zeros((4, 6), np.uint8), 0.0, 0)
    with pytest.raises(DataError, match="timestamp"):
        Frame("a", np.zeros((4, 6, 3), np.uint8), float("nan"), 0)
    K = np.array([[100.0, 0, 3], [0, 100.0, 2], [0, 0, 1]])
    with pytest.raises(DataError, match="X_WC of camera a"):
        CameraInfo("a", K, 6, 4, np.full((4, 4), np.nan))
    with pytest.raises(DataError, match="rigid"):
        CameraInfo("a", K, 6, 4, np.diag([2.0, 1, 1, 1]))
    with pytest.raises(DataError, match="K of camera a"):
        CameraInfo("a", K[:2], 6, 4, np.eye(4))
    with pytest.raises(DataError, match="width"):
        CameraInfo("a", K, 0, 4, np.eye(4))
