"""A screenshot of the teleoperation page from headless chromium (docs/img/teleop.png), offline twin.

    python scripts/teleop_screenshot.py [--out docs/img/teleop.png]

Starts an episode, clicks the table at a point (the click/tap way of placing the target), waits for the pusher
to get there, takes the screenshot and discards the episode. Prints one JSON object on its last line: the clicked
point, the target the page set from the click, the twin pusher's position, the loop rate.
"""

import argparse
import json
import threading
import time

import numpy as np
from playwright.sync_api import sync_playwright

from real_is_sim.cli import quiet_warp
from real_is_sim.demos.runner import EpisodeRunner
from real_is_sim.teleop.app import TeleopApp
from real_is_sim.transforms import quat_to_matrix, wxyz_to_xyzw

CLICK_XY = np.array([0.33, 0.16])  # world, on the table beside the block


def to_screen(camera, point: np.ndarray) -> tuple[float, float]:
    """Pixel of a world point in the client's view (viser's camera: OpenCV axes, vertical fov)."""
    R = quat_to_matrix(wxyz_to_xyzw(np.asarray(camera.wxyz)))
    x, y, z = R.T @ (np.asarray(point) - np.asarray(camera.position))
    f = 0.5 * camera.image_height / np.tan(0.5 * camera.fov)
    return 0.5 * camera.image_width + f * x / z, 0.5 * camera.image_height + f * y / z


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="docs/img/teleop.png")
    args = parser.parse_args()
    quiet_warp()
    runner = EpisodeRunner("offline")
    app = TeleopApp(runner, "127.0.0.1", 0)  # port 0: the OS picks a free one
    loop = threading.Thread(target=app.run, daemon=True)
    loop.start()
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium",
                                        args=["--use-angle=swiftshader", "--enable-unsafe-swiftshader"])
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            page.goto(app.url)
            page.get_by_role("button", name="Start").click(timeout=60_000)
            time.sleep(1.0)  # the pusher comes down onto the plane
            camera = next(iter(app.server.get_clients().values())).camera
            page.mouse.click(*to_screen(camera, app.ik.plane_point(CLICK_XY) - app.ik.height * app.ik.plane_world[:3]))
            time.sleep(2.0)
            page.screenshot(path=args.out)
            browser.close()
        summary = {"clicked_xy": CLICK_XY.tolist(), "target_xy": np.round(app.target_xy, 4).tolist(),
                   "pusher": np.round(runner.twin.tool_position()[0], 4).tolist(), "loop_hz": round(app.hz, 1),
                   "screenshot": args.out}
    finally:
        app.stop()
        loop.join(timeout=10)
        app.close()
        runner.close()
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
