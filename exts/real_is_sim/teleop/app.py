"""Web teleoperation of the twin robot (viser): the operator moves a target for the pusher in the table plane, the
planar IK turns it into joint targets q' every tick, and the episode runner steps the twin (and, online, the
stand-in world following it) and records the episode.

    run_teleop(runner, host="127.0.0.1", port=8080)   # then open http://127.0.0.1:8080

The page: the twin (table, goal, block, the arm as lines through its joints, the pusher), the target gizmo (drag
its square or arrows; a click or tap on the table moves it there too), one camera's picture with the twin's block
outlined, the sync confidence per object, Start / Stop (save) / Discard. Browser callbacks only queue requests and
move the target; the loop thread alone touches the runner, so the runner needs no locking.
"""

from __future__ import annotations

import collections
import threading
import time

import numpy as np
import viser

from real_is_sim.errors import ConfigError
from real_is_sim.robot.planar_ik import PlanarIK, PlanarIKResult
from real_is_sim.teleop.camera_view import CameraView
from real_is_sim.transforms import xyzw_to_wxyz

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
BLOCK_COLOR = (230, 90, 40)
GOAL_COLOR = (90, 190, 90)
ROBOT_COLOR = (70, 70, 80)
TARGET_COLOR = (40, 110, 230)
ARM_LINKS = 8  # panda_link0 .. panda_link7: the arm drawn as lines through their origins, then to the pusher


class TeleopApp:
    """The page and the control loop. ``run()`` blocks until ``stop()``, Ctrl-C, or ``episodes`` were saved."""

    def __init__(self, runner, host: str = "127.0.0.1", port: int = 8080, *, start_poses=None,
                 height: float = 0.035, max_tool_speed: float = 0.4, image_every: int = 10, image_width: int = 320):
        """``start_poses``: block start poses, one per saved episode in order (a discarded episode is retried from
        the same pose); None: the task's start pose every time. ``image_every``: ticks between camera pictures
        (the CPU renderer is the loop's most expensive part after the twin)."""
        if host not in LOOPBACK_HOSTS:
            raise ConfigError(f"teleop serves on a loopback address only ({', '.join(LOOPBACK_HOSTS)}), got {host!r}")
        if image_every < 1:
            raise ConfigError(f"image_every must be at least 1 tick, got {image_every}")
        self.runner, self.image_every = runner, image_every
        self.start_poses = None if start_poses is None else [np.asarray(p, dtype=np.float64) for p in start_poses]
        self.ik = PlanarIK(runner.twin.task, height=height, max_tool_speed=max_tool_speed)
        self.ik.reset(runner.robot_q())
        self.camera_views = {c.serial: CameraView(runner, c.serial, image_width) for c in runner.cameras}
        self.saved: list[dict] = []  # runner.end() of every saved episode
        self.recording = False
        self.ticks = 0
        self.hz = 0.0  # measured loop rate
        self.last_ik: PlanarIKResult | None = None
        self.confidence: dict[str, float] | None = None
        self._lock = threading.Lock()  # guards _target_xy and _requests (written by viser's threads)
        self._target_xy = self.ik.tool_position()[:2]
        self._requests: collections.deque[str] = collections.deque()
        self._stop = threading.Event()
        self.server = viser.ViserServer(host=host, port=port, verbose=False)
        self._build_scene()
        self._build_gui()
        self._update_scene()
        self._update_panel()

    @property
    def url(self) -> str:
        return f"http://{self.server.get_host()}:{self.server.get_port()}"

    @property
    def target_xy(self) -> np.ndarray:
        with self._lock:
            return self._target_xy.copy()

    # -- page ------------------------------------------------------------------------------------------------------

    def _build_scene(self) -> None:
        scene, twin = self.server.scene, self.runner.twin
        task = twin.task
        plane = self.ik.plane_world
        center = np.array([0.45, 0.0])  # the middle of the PushT workspace in front of the robot
        table_wxyz = _wxyz_from_z(plane[:3])
        scene.add_grid("/table", 1.2, 1.2, cell_size=0.05, section_size=0.25, plane_color=(235, 235, 230),
                       plane_opacity=1.0, position=self.ik.plane_point(center) - self.ik.height * plane[:3],
                       wxyz=table_wxyz)
        geometry = twin.geometry
        goal = np.asarray(task.goal.pose, dtype=np.float64)
        scene.add_point_cloud("/goal", geometry.centers, GOAL_COLOR, point_size=2 * geometry.radius,
                              point_shape="circle", position=goal[:3], wxyz=xyzw_to_wxyz(goal[3:7]))
        self.block = scene.add_point_cloud("/block", geometry.centers, BLOCK_COLOR, point_size=2 * geometry.radius,
                                           point_shape="circle")
        self.arm = scene.add_line_segments("/robot/arm", np.zeros((ARM_LINKS, 2, 3)), ROBOT_COLOR, thickness=0.02)
        robot = task.robot
        self.pusher = scene.add_cylinder("/robot/pusher", radius=robot.pusher_radius,
                                         height=2 * (robot.pusher_half_length + robot.pusher_radius),
                                         color=(150, 150, 160), wxyz=table_wxyz)
        self.target = scene.add_transform_controls(
            "/target", scale=0.15, active_axes=(True, True, False), disable_rotations=True, depth_test=False,
            position=self.ik.plane_point(self._target_xy), wxyz=table_wxyz)
        scene.add_icosphere("/target/marker", radius=0.008, color=TARGET_COLOR)
        self.target.on_update(lambda _: self._set_target(self.target.position[:2], move_gizmo=False))
        scene.on_click()(self._on_click)
        self.server.initial_camera.position = (1.35, -0.6, 0.95)
        self.server.initial_camera.look_at = (0.4, 0.05, 0.1)
        self.server.initial_camera.fov = np.radians(50.0)

    def _build_gui(self) -> None:
        gui = self.server.gui
        gui.add_markdown("**Real-is-Sim teleoperation.** Drag the blue target (its square or arrows), or click the "
                         "table, to move the pusher in the plane.")
        self.start_button = gui.add_button("Start", color="green")
        self.stop_button = gui.add_button("Stop (save)", disabled=True)
        self.discard_button = gui.add_button("Discard", color="red", disabled=True)
        for button, request in ((self.start_button, "start"), (self.stop_button, "stop"),
                                (self.discard_button, "discard")):
            button.on_click(lambda _, request=request: self._request(request))
        self.status = gui.add_markdown("")
        serials = list(self.camera_views)
        self.camera_choice = gui.add_dropdown("camera", serials, initial_value=serials[0])
        first = self.camera_views[serials[0]]
        self.camera_image = gui.add_image(np.zeros((first.height, first.width, 3), np.uint8),
                                          label="camera, twin outlined", format="jpeg")
        self.pictures = PictureWorker(lambda image: setattr(self.camera_image, "image", image))

    def _request(self, request: str) -> None:
        with self._lock:
            self._requests.append(request)

    def _set_target(self, xy, move_gizmo: bool) -> None:
        xy = np.asarray(xy, dtype=np.float64).copy()
        with self._lock:
            self._target_xy = xy
        if move_gizmo:
            self.target.position = self.ik.plane_point(xy)

    def _on_click(self, event) -> None:
        """A click or tap on the table: the pusher's target goes above the table point under the cursor."""
        origin, direction = np.asarray(event.ray_origin), np.asarray(event.ray_direction)
        normal, d = self.ik.plane_world[:3], self.ik.plane_world[3]
        denominator = direction @ normal
        if abs(denominator) < 1e-9:
            return
        depth = -(origin @ normal + d) / denominator
        if depth > 0:
            self._set_target((origin + depth * direction)[:2], move_gizmo=True)

    def _update_scene(self) -> None:
        twin = self.runner.twin
        pose = twin.object_poses()[0, 0]
        links = twin.robot_link_poses()[0, :ARM_LINKS, :3]
        tool = twin.tool_position()[0]
        joints = np.vstack([links, tool])
        with self.server.atomic():
            self.block.position, self.block.wxyz = pose[:3], xyzw_to_wxyz(pose[3:7])
            self.arm.points = np.stack([joints[:-1], joints[1:]], axis=1)
            self.pusher.position = tool

    def _update_panel(self) -> None:
        state = f"recording, t = {self.runner.t:.1f} s" if self.recording else "idle: press Start"
        lines = [f"**{state}** | saved episodes: {len(self.saved)} "
                 f"({sum(bool(e['success']) for e in self.saved)} at the goal) | loop {self.hz:.0f} Hz"]
        if self.saved:
            last = self.saved[-1]
            lines.append(f"last saved: episode {last['episode_index']}, {last['seconds']:.1f} s, "
                         f"{'at the goal' if last['success'] else 'not at the goal'}")
        if self.last_ik is not None:
            ik = self.last_ik
            lines.append(f"pusher {1e3 * ik.tracking_error_m:.0f} mm from the target, {1e3 * abs(ik.plane_error_m):.2f} mm "
                         f"off the plane, {ik.tilt_deg:.2f} deg tilt, IK {ik.solve_ms:.2f} ms")
        if self.confidence is None:
            mode = "offline: no correction" if self.runner.bridge is None else "no sensor reading yet"
            lines.append(f"sync confidence: n/a ({mode})")
        else:
            lines.append("sync confidence: " + ", ".join(f"{n} {c:.2f}" for n, c in self.confidence.items()))
        self.status.content = "  \n".join(lines)
        view = self.camera_views[self.camera_choice.value]
        self.pictures.submit(view, view.snapshot())
        self.start_button.disabled = self.recording
        self.stop_button.disabled = self.discard_button.disabled = not self.recording

    # -- loop ------------------------------------------------------------------------------------------------------

    def _handle(self, request: str) -> None:
        if request == "start" and not self.recording:
            start = None if self.start_poses is None else self.start_poses[len(self.saved)]
            self.runner.begin(start)
            self.ik.reset(self.runner.robot_q())
            self._set_target(self.ik.tool_position()[:2], move_gizmo=True)  # come down where the pusher is
            self.recording = True
        elif request == "stop" and self.recording:
            self.recording = False
            self.saved.append(self.runner.end())
        elif request == "discard" and self.recording:
            self.recording = False
            self.runner.discard()

    def tick(self) -> None:
        """Pending page requests, then (recording) target -> planar IK -> q' -> one runner step; the view."""
        with self._lock:
            requests = list(self._requests)
            self._requests.clear()
        for request in requests:
            self._handle(request)
        if self.recording:
            self.last_ik = self.ik.step(self.target_xy)
            report = self.runner.step(self.last_ik.q)
            reading = getattr(report, "reading", None)  # online: the bridge's TickReport, when the runner returns it
            if reading is not None:
                self.confidence = dict(zip(self.runner.twin.object_names, map(float, reading.confidence)))
            self._update_scene()
        if self.ticks % self.image_every == 0 or requests:
            self._update_panel()
        self.ticks += 1

    def done(self, episodes: int | None) -> bool:
        if episodes is not None and len(self.saved) >= episodes:
            return True
        return self.start_poses is not None and len(self.saved) >= len(self.start_poses)

    def run(self, episodes: int | None = None) -> list[dict]:
        """Tick at the control rate by the wall clock until ``stop()``, Ctrl-C (re-raised after the clean stop) or
        ``episodes`` saved. A tick slower than 1/60 s is not made up for: the twin's time runs slower than the
        wall clock then (online, the stand-in's time with it). An unfinished episode is discarded."""
        dt = self.runner.twin.control_dt
        next_tick = last = time.perf_counter()
        period = dt
        try:
            while not self._stop.is_set() and not self.done(episodes):
                self.tick()
                now = time.perf_counter()
                period = 0.9 * period + 0.1 * (now - last)
                self.hz, last = 1.0 / period, now
                next_tick += dt
                if next_tick > now:
                    time.sleep(next_tick - now)
                else:
                    next_tick = now
        finally:
            if self.recording:
                self.recording = False
                self.runner.discard()
        return list(self.saved)

    def stop(self) -> None:
        """Ask ``run()`` to return (from any thread)."""
        self._stop.set()

    def close(self) -> None:
        self.pictures.close()
        self.server.stop()


class PictureWorker:
    """Renders the camera picture in its own thread: on the CPU renderer it takes ~0.1 s, which inline would stall
    the 60 Hz loop for several ticks. The loop hands it a snapshot; a newer one replaces one not yet started."""

    def __init__(self, show):
        self._show = show
        self._job = None
        self._error: BaseException | None = None
        self._closed = False
        self._wake = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="teleop-pictures", daemon=True)
        self._thread.start()

    def submit(self, view: CameraView, snapshot) -> None:
        """Queue a picture; raises here, in the loop thread, what the last render raised."""
        with self._wake:
            if self._error is not None:
                raise self._error
            self._job = (view, snapshot)
            self._wake.notify()

    def _run(self) -> None:
        while True:
            with self._wake:
                self._wake.wait_for(lambda: self._job is not None or self._closed)
                if self._closed:
                    return
                (view, snapshot), self._job = self._job, None
            try:
                self._show(view.image(*snapshot))
            except Exception as error:  # handed to the loop thread by submit()
                with self._wake:
                    self._error = error
                return

    def close(self) -> None:
        with self._wake:
            self._closed = True
            self._wake.notify()
        self._thread.join(timeout=5.0)


def run_teleop(runner, host: str = "127.0.0.1", port: int = 8080, *, episodes: int | None = None,
               start_poses=None, height: float = 0.035, max_tool_speed: float = 0.4, image_every: int = 10,
               on_ready=None) -> list[dict]:
    """Serve the teleoperation page for ``runner`` (an ``EpisodeRunner``, offline or online) and run the 60 Hz loop
    until ``episodes`` episodes were saved (None: until Ctrl-C, re-raised after the clean stop), or all
    ``start_poses`` were used. ``on_ready(app)`` is called once the page is served. Returns the runner's ``end()``
    result of each saved episode. The runner stays open (the caller closes it)."""
    app = TeleopApp(runner, host, port, start_poses=start_poses, height=height, max_tool_speed=max_tool_speed,
                    image_every=image_every)
    try:
        print(f"teleoperation page: {app.url}", flush=True)
        if on_ready is not None:
            on_ready(app)
        return app.run(episodes)
    finally:
        app.close()


def _wxyz_from_z(z_axis: np.ndarray) -> np.ndarray:
    """Quaternion (w, x, y, z) of the shortest rotation taking +z onto ``z_axis``."""
    z_axis = np.asarray(z_axis, dtype=np.float64) / np.linalg.norm(z_axis)
    w = 1.0 + z_axis[2]
    if w < 1e-9:  # z_axis = -z: half a turn about x
        return np.array([0.0, 1.0, 0.0, 0.0])
    q = np.array([w, -z_axis[1], z_axis[0], 0.0])  # (1 + z.a, z x a)
    return q / np.linalg.norm(q)
