"""The teleoperation page in a real headless browser (Debian's chromium driven by playwright): load it, press Start,
drag the target's plane handle with the mouse, press Stop: one episode is recorded in which the twin's pusher moved
with the target while staying on the plane."""

import shutil
import threading
import time

import numpy as np
import pytest

from real_is_sim.robot.kinematics import PandaKinematics
from real_is_sim.transforms import quat_to_matrix, wxyz_to_xyzw

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
# drei's PivotControls (viser's transform controls) put the XY plane handle at 1.7 / 7 of the gizmo's scale along
# both of its in-plane axes (@react-three/drei PivotControls/PlaneSlider).
PLANE_HANDLE_OFFSET = 1.7 / 7
DRAG = np.array([0.10, -0.05])  # m, world x, y: away from the block, within reach


def wait_for(condition, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def to_screen(camera, point: np.ndarray) -> tuple[float, float]:
    """Pixel of a world point in the client's view (viser's camera: OpenCV axes, vertical fov)."""
    R = quat_to_matrix(wxyz_to_xyzw(np.asarray(camera.wxyz)))
    x, y, z = R.T @ (np.asarray(point) - np.asarray(camera.position))
    f = 0.5 * camera.image_height / np.tan(0.5 * camera.fov)
    return 0.5 * camera.image_width + f * x / z, 0.5 * camera.image_height + f * y / z


@pytest.fixture
def teleop(tmp_path):
    if not shutil.which(CHROMIUM):
        pytest.skip(f"chromium not found at {CHROMIUM} (Debian package chromium)")
    pytest.importorskip("playwright", reason="playwright (test extra) not installed")
    from real_is_sim.demos.runner import EpisodeRunner, dataset_writer_for
    from real_is_sim.teleop.app import TeleopApp

    runner = EpisodeRunner("offline")
    runner.writer = dataset_writer_for(runner, tmp_path / "dataset")
    app = TeleopApp(runner, "127.0.0.1", 0)  # port 0: the OS picks a free one, app.url says which
    loop = threading.Thread(target=app.run, daemon=True)
    loop.start()
    yield app, tmp_path / "dataset"
    app.stop()
    loop.join(timeout=10)
    app.close()
    runner.close()


def test_dragging_the_target_in_the_browser_moves_the_pusher_and_records_an_episode(teleop):
    from playwright.sync_api import sync_playwright

    from real_is_sim.demos.dataset import load_dataset

    app, dataset_root = teleop
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--use-angle=swiftshader", "--enable-unsafe-swiftshader"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            page.goto(app.url)
            page.get_by_role("button", name="Start").click(timeout=60_000)
            wait_for(lambda: app.recording and app.last_ik is not None and abs(app.last_ik.plane_error_m) < 1e-4,
                     10, "the pusher to come down onto the plane")
            client = next(iter(app.server.get_clients().values()))
            start_xy = app.target_xy
            handle = app.target.position + PLANE_HANDLE_OFFSET * app.target.scale * np.array([1.0, 1.0, 0.0])
            page.mouse.move(*to_screen(client.camera, handle))
            page.mouse.down()
            page.mouse.move(*to_screen(client.camera, handle + np.append(DRAG, 0.0)), steps=15)
            page.mouse.up()
            wait_for(lambda: np.linalg.norm(app.target_xy - (start_xy + DRAG)) < 0.01, 10, "the target to follow the drag")
            wait_for(lambda: np.linalg.norm(app.runner.twin.tool_position()[0, :2] - app.target_xy) < 0.005, 10,
                     "the twin's pusher to reach the target")
            page.get_by_role("button", name="Stop (save)").click()
            wait_for(lambda: app.saved, 10, "the episode to be saved")
        finally:
            browser.close()

    dataset = load_dataset(dataset_root)
    assert len(dataset.episodes) == 1
    episode = dataset.episodes[0]
    kinematics = PandaKinematics(app.runner.twin.task.robot.pusher_offset)  # base at the origin in pusht.yaml
    tool = np.array([kinematics.tool_position(q) for q in episode.q])
    on_plane = np.abs(tool[:, 2] - app.ik.height) < 1e-3
    assert on_plane[-1] and on_plane.sum() > 30, "the recorded pusher did not stay on the plane"
    first = np.argmax(on_plane)
    assert np.all(on_plane[first:]), "the recorded pusher left the plane after reaching it"
    moved = tool[-1, :2] - tool[first, :2]
    assert np.linalg.norm(moved - DRAG) < 0.01, f"the pusher moved {moved}, the drag was {DRAG}"


def test_the_page_is_served_on_loopback_only():
    from real_is_sim.errors import ConfigError
    from real_is_sim.teleop.app import TeleopApp

    with pytest.raises(ConfigError, match="loopback"):
        TeleopApp(runner=None, host="0.0.0.0")  # refused before anything is built or served
