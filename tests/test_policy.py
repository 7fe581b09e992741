"""The flow-matching waypoint policy: shapes, chunks, scheduler, learning a tiny dataset, checkpoints, bad input,
camera observations."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch

from real_is_sim.cli import main as cli_main
from real_is_sim.demos.dataset import DatasetWriter
from real_is_sim.errors import ConfigError, DataError
from real_is_sim.policy.checkpoint import load_checkpoint, save_checkpoint
from real_is_sim.policy.config import PolicyCfg, TrainCfg
from real_is_sim.policy.data import action_chunks, build_training_set
from real_is_sim.policy.flow import (GOAL_SQUASH, dct_basis, goal_features, observation_features,
                                     pose_features, state_vector, untrained_policy, yaw_cos_sin)
from real_is_sim.policy.network import state_dim
from real_is_sim.policy.observations import ObservationRenderer, cached_images
from real_is_sim.policy.scheduler import WaypointScheduler
from real_is_sim.policy.train import WeightAverage, perturb_states, train

Q0 = np.array([0.0, -0.6, 0.0, -2.4, 0.0, 1.8, 0.8])
BLOCK_X = (0.40, 0.45, 0.50, 0.55)
FRAMES = 60


def synthetic_command(x: float, t: float) -> np.ndarray:
    """Joint 0 drifts at a speed set by the block's x (the policy must read the pose), joint 1 at a fixed speed."""
    cmd = Q0.copy()
    cmd[0] += (x - 0.475) * 4 * t
    cmd[1] += 0.3 * t
    return cmd


def write_synthetic_dataset(root, cell_yaml: str = "synthetic: true\n"):
    writer = DatasetWriter(root, fps=60, cell_yaml=cell_yaml)
    for x in BLOCK_X:
        writer.start_episode("push")
        for i in range(FRAMES):
            cmd = synthetic_command(x, i / 60)
            writer.add_frame(t=i / 60, object_poses=[[x, 0.0, 0.0, 0, 0, 0, 1.0]], q=cmd - 0.01, q_cmd=cmd)
        writer.end_episode(True)
    return root


@pytest.fixture(scope="module")
def tiny_dataset(tmp_path_factory):
    return write_synthetic_dataset(tmp_path_factory.mktemp("tiny") / "dataset")


TINY_POLICY = PolicyCfg(hidden=256)
TINY_TRAIN = TrainCfg(steps=800, batch_size=64, lr=3e-3, warmup_steps=20, checkpoint_every=400, seed=3)


@pytest.fixture(scope="module")
def trained(tiny_dataset, tmp_path_factory):
    out = tmp_path_factory.mktemp("run")
    return train(tiny_dataset, TINY_POLICY, TINY_TRAIN, out, progress=False), out


@pytest.mark.parametrize("variant, trunk, basis", [("pose", "mlp", 8), ("static_camera", "mlp", 8), ("pose", "unet", 0)])
def test_chunk_shape_and_progress_range(variant, trunk, basis):
    torch.manual_seed(0)
    policy = untrained_policy(PolicyCfg(variant=variant, trunk=trunk, basis=basis))
    images = np.random.default_rng(0).integers(0, 256, (5, 64, 64, 3), dtype=np.uint8)
    chunks = policy.act(np.zeros((5, 1, 7)), np.zeros((5, 7)), images if policy.cfg.uses_images else None,
                        generator=torch.Generator().manual_seed(0))
    assert chunks.shape == (5, 32, 8)
    assert np.all(np.isfinite(chunks))
    assert chunks[..., 7].min() >= 0.0 and chunks[..., 7].max() <= 1.0
    assert chunks[..., 7].min() == 0.0 or chunks[..., 7].max() == 1.0  # untrained: some progress was clipped


def test_dct_basis_is_orthonormal_and_keeps_smooth_chunks():
    basis = dct_basis(32, 8)
    torch.testing.assert_close(basis.T @ basis, torch.eye(8), atol=1e-5, rtol=0)
    t = torch.linspace(0, 1, 32)[:, None]
    smooth = torch.cat([0.3 * t, torch.sin(2 * t), t ** 2], dim=1)  # motions within one second
    assert (basis @ (basis.T @ smooth) - smooth).abs().max() < 0.05  # worst at the ends, where the slope is cut
    jagged = torch.tensor([(-1.0) ** k for k in range(32)])[:, None]  # waypoint-to-waypoint jitter is not kept
    assert (basis @ (basis.T @ jagged)).abs().mean() < 0.1


def test_action_chunk_interpolates_every_32nd_second_and_holds_the_end():
    t = np.arange(90) / 60
    q_cmd = np.repeat(t[:, None], 7, axis=1) * np.arange(1, 8)  # joint j moves at j+1 rad/s
    progress = t / t[-1]
    chunk = action_chunks(t, q_cmd, progress, np.array([0, 60]), waypoints=32, horizon_s=1.0)
    times = np.minimum(np.array([0.0, 1.0])[:, None] + np.arange(32)[None] / 32, t[-1])
    np.testing.assert_allclose(chunk[..., :7], times[..., None] * np.arange(1, 8), atol=1e-5)
    np.testing.assert_allclose(chunk[..., 7], times / t[-1], atol=1e-6)
    assert np.all(chunk[1, 16:, 7] == chunk[1, -1, 7])  # past the end: the last frame repeats


def test_scheduler_switches_waypoint_every_horizon_over_m_and_asks_for_a_new_chunk():
    scheduler = WaypointScheduler(num_envs=2)
    assert scheduler.needs_chunk().tolist() == [0, 1]
    chunks = np.zeros((2, 32, 8))
    chunks[:, :, 0] = np.arange(32)  # joint 0 = waypoint index
    chunks[:, :, 7] = np.arange(32) / 31
    chunks[1, :, 0] += 100
    scheduler.set_chunks([0, 1], chunks)
    targets, progress = [], []
    for _ in range(60):
        assert len(scheduler.needs_chunk()) == 0
        targets.append(scheduler.step()[:, 0])
        progress.append(scheduler.progress.copy())
    expected = np.floor(np.arange(60) / 60 * 32)  # waypoint k during [k/32 s, (k+1)/32 s)
    np.testing.assert_array_equal(np.array(targets)[:, 0], expected)
    np.testing.assert_array_equal(np.array(targets)[:, 1], expected + 100)
    np.testing.assert_allclose(np.array(progress)[:, 0], expected / 31)
    assert scheduler.needs_chunk().tolist() == [0, 1]
    with pytest.raises(DataError):
        scheduler.step()
    scheduler.set_chunks([1], chunks[1:])
    assert scheduler.needs_chunk().tolist() == [0]
    with pytest.raises(DataError):
        scheduler.set_chunks([0], np.zeros((1, 16, 8)))


def test_scheduler_receding_horizon_runs_the_first_waypoints_then_asks_again():
    scheduler = WaypointScheduler(num_envs=1, execute=8)
    chunk = np.zeros((1, 32, 8))
    chunk[0, :, 0] = np.arange(32)
    scheduler.set_chunks([0], chunk)
    targets = []
    while not len(scheduler.needs_chunk()):
        targets.append(scheduler.step()[0, 0])
    assert len(targets) == 15  # 8 waypoints of 1/32 s at 60 Hz
    np.testing.assert_array_equal(targets, np.floor(np.arange(15) / 60 * 32))  # the same timing as a whole chunk
    assert WaypointScheduler(num_envs=1, execute=16).ticks_per_chunk == 30
    for bad in (0, 33):
        with pytest.raises(ConfigError):
            WaypointScheduler(num_envs=1, execute=bad)


def test_tempo_runs_the_same_waypoints_in_less_time():
    from real_is_sim.evaluation.offline import make_scheduler

    chunk = np.zeros((1, 32, 8))
    chunk[0, :, 0] = np.arange(32)
    policy = untrained_policy(PolicyCfg(tempo=2.0))
    runs = {}
    for tempo in (None, 1.0):  # the checkpoint's tempo (2), then an evaluation's override
        scheduler = make_scheduler(policy, 1, 1 / 60, execute=16, tempo=tempo)
        scheduler.set_chunks([0], chunk)
        runs[tempo] = []
        while not len(scheduler.needs_chunk()):
            runs[tempo].append(scheduler.step()[0, 0])
    assert len(runs[None]) == 15 and len(runs[1.0]) == 30  # 16 waypoints in 0.25 s instead of 0.5 s
    np.testing.assert_array_equal(runs[None], np.floor(np.arange(15) / 30 * 32))
    assert set(runs[None]) < set(runs[1.0])  # ticks fall between waypoints: waypoint 15 is skipped
    with pytest.raises(ConfigError, match="tempo"):
        PolicyCfg(tempo=0.0)


def yaw_pose(yaw: float, sign: float = 1.0) -> list[float]:
    """A block pose at (0.5, 0.1, 0.02) turned by ``yaw`` about z; ``sign`` -1 gives the same rotation as -q."""
    return [0.5, 0.1, 0.02, 0.0, 0.0, sign * np.sin(yaw / 2), sign * np.cos(yaw / 2)]


def test_pose_features_are_yaw_cos_sin_continuous_at_180_deg_and_blind_to_the_quaternion_sign():
    poses = torch.tensor([[yaw_pose(np.pi - 1e-3)], [yaw_pose(-np.pi + 1e-3)], [yaw_pose(0.7)], [yaw_pose(0.7, -1.0)]])
    features = pose_features(poses)
    assert features.shape == (4, 5)
    torch.testing.assert_close(features[2], torch.tensor([0.5, 0.1, 0.02, np.cos(0.7), np.sin(0.7)]), atol=1e-6, rtol=0)
    torch.testing.assert_close(features[2], features[3])  # q and -q: one rotation, one feature
    assert (features[0] - features[1]).abs().max() < 3e-3  # either side of +-180 deg: neighbours (qz jumps there)


def test_goal_features_measure_the_offset_from_the_goal_in_tolerances():
    goal = [0.5, 0.1, np.pi / 4, 0.02, 0.15]  # PushT's goal: (0.5, 0.1), yaw 45 deg, 2 cm, 0.15 rad
    along = [0.5 + 0.02 * np.cos(np.pi / 4), 0.1 + 0.02 * np.sin(np.pi / 4), 0.02, 0, 0, np.sin(np.pi / 8), np.cos(np.pi / 8)]
    # at the goal, 1 tolerance along its x axis, -1 and +2 tolerances in yaw (the last wrapped)
    poses = torch.tensor([yaw_pose(np.pi / 4), along, yaw_pose(np.pi / 4 - 0.15), yaw_pose(np.pi / 4 - 2 * np.pi + 0.3)],
                         dtype=torch.float32)
    units = torch.atanh(goal_features(poses, goal)) * GOAL_SQUASH
    expected = torch.tensor([[0, 0, 0], [1, 0, 0], [0, 0, -1], [0, 0, 2]], dtype=torch.float32)
    torch.testing.assert_close(units, expected, atol=1e-3, rtol=1e-3)
    cfg = PolicyCfg(goal_features=True, goal=goal)
    features = observation_features(cfg, state_vector("pose", poses[:, None], np.zeros((4, 7))))
    assert features.shape == (4, state_dim(cfg)) == (4, 15)
    with pytest.raises(ConfigError):
        PolicyCfg(variant="wrist_camera", goal_features=True)


def test_tool_chain_matches_pinocchio_and_tool_features_are_in_the_block_frame():
    from real_is_sim.policy.tool import ToolChain, tool_chain
    from real_is_sim.robot.kinematics import PandaKinematics
    from real_is_sim.transforms import pose_to_matrix

    base = np.array([0.1, -0.2, 0.05, 0.0, 0.0, np.sin(np.pi / 8), np.cos(np.pi / 8)])  # turned 45 deg
    q = np.random.default_rng(0).uniform(-1.5, 1.5, (6, 7))
    kinematics, T_base = PandaKinematics(tool_offset=0.05), pose_to_matrix(base)
    expected = np.array([T_base[:3, :3] @ kinematics.tool_position(x) + T_base[:3, 3] for x in q])
    positions = ToolChain(0.05, base).position(torch.tensor(q, dtype=torch.float32))
    np.testing.assert_allclose(positions.numpy(), expected, atol=1e-5)

    # a block turned 90 deg: a pusher 3 cm from its centre along world +y is 3 cm along the block's x axis
    cfg = PolicyCfg(tool_features=True)  # the task's default cell
    tool = tool_chain(cfg.cell).position(torch.tensor(q[:1], dtype=torch.float32))
    block = torch.tensor(yaw_pose(np.pi / 2), dtype=torch.float32)[None, None].clone()
    block[0, 0, :2] = tool[0, :2] - torch.tensor([0.0, 0.03])
    features = observation_features(cfg, state_vector("pose", block, q[:1]))
    assert features.shape == (1, state_dim(cfg)) == (1, 12 + 5)
    torch.testing.assert_close(features[0, 5:8], tool[0])
    torch.testing.assert_close(features[0, 8:10], torch.tensor([0.03, 0.0]), atol=1e-6, rtol=0)
    with pytest.raises(ConfigError):
        PolicyCfg(variant="static_camera", tool_features=True)


def test_relative_actions_run_the_flow_over_offsets_from_the_current_q():
    from real_is_sim.policy.flow import untrained_policy

    for variant in ("pose", "wrist_camera"):
        policy = untrained_policy(PolicyCfg(variant=variant, relative_actions=True))
        q = torch.randn(3, 7)
        state = state_vector(variant, torch.randn(3, 1, 7), q)
        chunk = torch.cat([q[:, None].repeat(1, 32, 1) + 0.1, torch.full((3, 32, 1), 0.5)], dim=-1)
        flow = policy.to_flow(chunk, state)  # a chunk holding q + 0.1: only the constant DCT coefficient, 0.1 sqrt(32)
        torch.testing.assert_close(flow[:, 0, :7], torch.full((3, 7), 0.1 * 32 ** 0.5))
        torch.testing.assert_close(flow[:, 1:, :7], torch.zeros(3, 7, 7), atol=1e-5, rtol=0)
        torch.testing.assert_close(policy.from_flow(flow, state), chunk, atol=1e-5, rtol=0)


def test_noise_scale_sets_how_far_from_the_flow_mean_a_sample_starts():
    from real_is_sim.policy.flow import untrained_policy

    policy = untrained_policy(PolicyCfg(noise_scale=0.5))
    state, noise = state_vector("pose", torch.randn(2, 1, 7), torch.randn(2, 7)), torch.randn(2, 8, 8)
    torch.testing.assert_close(policy.sample(state, noise=noise), policy.sample(state, noise=0.5 * noise, noise_scale=1.0))
    torch.testing.assert_close(policy.sample(state, noise=noise, noise_scale=0.0),
                               policy.sample(state, noise=torch.randn(2, 8, 8), noise_scale=0.0))  # the mean path
    assert not torch.allclose(policy.sample(state, noise=noise), policy.sample(state, noise=noise, noise_scale=1.0))
    with pytest.raises(ConfigError):
        PolicyCfg(noise_scale=-0.1)


def test_history_pairs_each_frame_with_the_one_k_earlier_padded_with_the_first(tiny_dataset):
    from real_is_sim.demos.dataset import load_dataset

    episodes = load_dataset(tiny_dataset).episodes
    data = build_training_set(episodes, 32, 1.0, 1, history_frames=6)
    first = data.episode == data.episode[0]
    np.testing.assert_array_equal(data.previous_q[first][:7], np.repeat(data.q[:1], 7, 0))  # frames 0..6: frame 0
    np.testing.assert_array_equal(data.previous_q[first][6:], data.q[first][:-6])  # frame i: frame i - 6
    cfg = PolicyCfg(history_frames=6)
    features = observation_features(cfg, state_vector("pose", data.object_poses, data.q, data.previous))
    assert features.shape == (len(data), state_dim(cfg)) == (len(data), 24)
    before = observation_features(PolicyCfg(), state_vector("pose", *data.previous))
    torch.testing.assert_close(features[:, 12:], features[:, :12] - before)
    with pytest.raises(ConfigError, match="previous"):
        untrained_policy(cfg).act(data.object_poses[:2], data.q[:2])


def test_policy_fits_tiny_dataset(trained, tiny_dataset):
    from real_is_sim.demos.dataset import load_dataset

    result, out = trained
    assert np.mean(result.losses[-25:]) < np.mean(result.losses[:25]) / 10
    assert (out / "loss.png").stat().st_size > 0 and json.loads((out / "train.json").read_text())["steps"] == 800
    policy, _ = load_checkpoint(result.checkpoint)
    data = build_training_set(load_dataset(tiny_dataset).episodes, 32, 1.0, 1)
    picked = np.arange(0, len(data), 20)
    repeats = 32  # the mean of many samples of one observation: the data's (mean) chunk there
    samples = policy.act(np.repeat(data.object_poses[picked], repeats, 0), np.repeat(data.q[picked], repeats, 0),
                         generator=torch.Generator().manual_seed(0))
    mean_chunk = samples.reshape(len(picked), repeats, 32, 8).mean(axis=1)
    error = np.abs(mean_chunk - data.chunks[picked])
    print("mean |error| of the mean sample, joints 0-1 [rad] and progress:", error[..., [0, 1, 7]].mean(axis=(0, 1)))
    assert error[..., :7].max() < 0.1 * np.ptp(data.chunks[..., :2])  # rad: a tenth of the joints' motion
    assert error[..., 7].mean() < 0.05 and error[..., 7].max() < 0.2  # progress (clipping at 0 and 1 biases the ends)
    # a chunk for one block pose is not the chunk of another: the observation conditions the samples
    assert np.abs(mean_chunk[0, -1, 0] - mean_chunk[-1, -1, 0]) > 0.1


def test_checkpoint_round_trip_gives_bit_identical_actions(trained, tmp_path):
    result, _ = trained
    policy, state = load_checkpoint(result.checkpoint)
    copy = save_checkpoint(tmp_path / "copy.pt", policy, TrainCfg(**state["train_cfg"]), state["step"])
    reloaded, _ = load_checkpoint(copy)
    poses, q = np.full((3, 1, 7), 0.5), np.tile(Q0, (3, 1))
    a = policy.act(poses, q, generator=torch.Generator().manual_seed(7))
    b = reloaded.act(poses, q, generator=torch.Generator().manual_seed(7))
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, policy.act(poses, q, generator=torch.Generator().manual_seed(8)))


def test_training_is_deterministic_and_resume_continues_exactly(tiny_dataset, tmp_path):
    cfg = TrainCfg(steps=40, batch_size=16, checkpoint_every=20, warmup_steps=5, seed=1)
    straight = train(tiny_dataset, TINY_POLICY, cfg, tmp_path / "a", progress=False)
    again = train(tiny_dataset, TINY_POLICY, cfg, tmp_path / "b", progress=False)
    assert straight.losses == again.losses
    (tmp_path / "c").mkdir()
    shutil.copy(tmp_path / "a" / "step_000020.pt", tmp_path / "c" / "last.pt")  # as if killed after step 20
    resumed = train(tiny_dataset, TINY_POLICY, cfg, tmp_path / "c", resume=True, progress=False)
    assert resumed.losses == straight.losses
    weights_a, weights_c = (torch.load(p / "last.pt", weights_only=True)["model"] for p in (tmp_path / "a", tmp_path / "c"))
    assert all(torch.equal(weights_a[k], weights_c[k]) for k in weights_a)
    with pytest.raises(DataError, match="other settings"):
        train(tiny_dataset, TINY_POLICY, TrainCfg(steps=41, batch_size=16), tmp_path / "c", resume=True, progress=False)


def test_weight_average_follows_the_warmed_up_decay():
    layer = torch.nn.Linear(2, 1)
    with torch.no_grad():
        layer.weight.fill_(0.0)
    average = WeightAverage(layer, decay=0.99)
    with torch.no_grad():
        layer.weight.fill_(1.0)
    average.update(layer, step=1)  # warm-up: decay (1 + 1) / (10 + 1)
    torch.testing.assert_close(average.weights["weight"], torch.full((1, 2), 1.0 - 2.0 / 11.0))
    average.update(layer, step=10_000)  # decay capped at 0.99
    torch.testing.assert_close(average.weights["weight"], torch.full((1, 2), 1.0 - 0.99 * 2.0 / 11.0))


def test_averaged_weights_travel_in_the_checkpoint_resume_exactly_and_are_what_inference_uses(tiny_dataset, tmp_path):
    cfg = TrainCfg(steps=40, batch_size=16, checkpoint_every=20, warmup_steps=5, seed=1, ema_decay=0.9)
    straight = train(tiny_dataset, TINY_POLICY, cfg, tmp_path / "a", progress=False)
    (tmp_path / "c").mkdir()
    shutil.copy(tmp_path / "a" / "step_000020.pt", tmp_path / "c" / "last.pt")
    resumed = train(tiny_dataset, TINY_POLICY, cfg, tmp_path / "c", resume=True, progress=False)
    assert resumed.losses == straight.losses
    policy, state = load_checkpoint(straight.checkpoint)
    resumed_state = torch.load(resumed.checkpoint, weights_only=True)
    assert all(torch.equal(state["ema"][k], resumed_state["ema"][k]) for k in state["ema"])
    loaded = policy.state_dict()
    assert all(torch.equal(loaded[k], state["ema"][k]) for k in loaded)
    assert not all(torch.equal(state["ema"][k], state["model"][k]) for k in loaded)


def test_malformed_dataset_gives_one_clear_error(tmp_path):
    writer = DatasetWriter(tmp_path / "bad", fps=60, cell_yaml="x: 1\n")
    writer.start_episode("push")
    for i in range(10):
        writer.add_frame(t=i / 60, object_poses=np.zeros((2, 7)), q=Q0, q_cmd=Q0)  # two objects
    writer.end_episode(True)
    with pytest.raises(DataError, match="object_poses has shape"):
        train(tmp_path / "bad", TINY_POLICY, TrainCfg(steps=1), tmp_path / "out", progress=False)
    writer = DatasetWriter(tmp_path / "failed", fps=60, cell_yaml="x: 1\n")
    writer.start_episode("push")
    for i in range(10):
        writer.add_frame(t=i / 60, object_poses=np.zeros((1, 7)), q=Q0, q_cmd=Q0)
    writer.end_episode(False)
    with pytest.raises(DataError, match="no successful episode"):
        train(tmp_path / "failed", TINY_POLICY, TrainCfg(steps=1), tmp_path / "out", progress=False)
    with pytest.raises(DataError, match="missing"):
        train(tmp_path / "nowhere", TINY_POLICY, TrainCfg(steps=1), tmp_path / "out", progress=False)
    with pytest.raises(ConfigError, match="variant"):
        PolicyCfg(variant="lidar")


def test_malformed_checkpoint_gives_one_clear_error(trained, tmp_path):
    result, _ = trained
    garbage = tmp_path / "garbage.pt"
    garbage.write_bytes(b"not a checkpoint")
    truncated = tmp_path / "truncated.pt"
    truncated.write_bytes(result.checkpoint.read_bytes()[:5000])
    other = tmp_path / "other.pt"
    torch.save({"weights": torch.zeros(3)}, other)
    wrong_net = tmp_path / "wrong.pt"
    state = torch.load(result.checkpoint, weights_only=True)
    state["policy_cfg"]["hidden"] = 128
    torch.save(state, wrong_net)
    for path, message in ((garbage, "not a readable"), (truncated, "not a readable"), (other, "not a policy checkpoint"),
                          (wrong_net, "does not match"), (tmp_path / "absent.pt", "not found")):
        with pytest.raises(DataError, match=message):
            load_checkpoint(path)


def test_rendered_observations_equal_a_direct_render(tmp_path):
    from real_is_sim.render.virtual_cameras import render_virtual
    from real_is_sim.twin.tblock import block_geometry
    from real_is_sim_tasks.pusht import load_pusht_cfg

    cell = load_pusht_cfg()
    poses = np.repeat(np.asarray(block_geometry(cell).start_pose)[None, None], 3, 0)
    poses[:, 0, 0] += [0.0, 0.05, -0.05]
    q = np.tile(np.asarray(cell.robot.q_start), (3, 1))
    q[1, 0] += 0.2
    for variant, kind in (("static_camera", "static"), ("wrist_camera", "wrist")):
        renderer = ObservationRenderer(variant, 32, cell)
        direct = render_virtual(kind, poses, q, 32, 32, cell=cell)
        np.testing.assert_array_equal(renderer.render(poses, q), direct)
        cached = cached_images(tmp_path, renderer, poses, q, progress=False)
        np.testing.assert_array_equal(cached, direct)
        assert np.any(direct[0] != direct[1])  # the states differ in the images
    # the cache is read back for the same states, rendered anew for others
    static = ObservationRenderer("static_camera", 32, cell)
    direct = render_virtual("static", poses, q, 32, 32, cell=cell)
    assert np.array_equal(cached_images(tmp_path, static, poses, q, progress=False), direct)
    moved = poses.copy()
    moved[:, 0, 1] += 0.05
    np.testing.assert_array_equal(cached_images(tmp_path, static, moved, q, progress=False),
                                  render_virtual("static", moved, q, 32, 32, cell=cell))


def test_real_image_is_the_standins_camera_not_the_twins_model():
    from real_is_sim.bridge import BridgeCfg, build_bridge
    from real_is_sim.evaluation.offline import renderer_of
    from real_is_sim.bridge.config import CamerasCfg
    from real_is_sim.render.virtual_cameras import render_virtual
    from real_is_sim.standin.appearance import HiddenAppearance
    from real_is_sim.standin.world import StandInCfg
    from real_is_sim_tasks.pusht import load_pusht_cfg

    cell = load_pusht_cfg()
    # online: a stand-in whose one camera stands where the static camera does, at 32 x 32 (the ring around the
    # default start pose), exact pixels
    reality = StandInCfg(seed=4, noise_std=0.0, drop_probability=0.0, appearance=HiddenAppearance.realistic())
    bridge = build_bridge(BridgeCfg(cameras=CamerasCfg(num_cameras=1, width=32, height=32), standin=reality), cell)
    try:
        standin = bridge.standin
        poses, q = standin.object_poses()[None], np.asarray(standin.follower.read_state().q)[None]
        standin._previous = None  # one sharp exposure, as the policy's camera takes
        frame = standin._render(standin.source.cameras, 0.5)["sim0"]
        camera = ObservationRenderer("real_image", 32, cell, reality=bridge.cfg.standin,
                                     block_scale=standin.params.block_scale)
        seen = camera.render(poses, q, t=0.5)[0].astype(int)
        assert np.abs(seen - np.round(frame * 255)).max() <= 1  # what the stand-in's camera captures
    finally:
        bridge.hold_and_stop()
    # training and offline: realities drawn with the realistic appearance, far from the twin's model
    states = np.repeat(poses, 2, 0)
    states[1, 0, 1] += 0.06
    drawn = ObservationRenderer("real_image", 32, cell, seed=3).render(states, np.repeat(q, 2, 0))
    np.testing.assert_array_equal(drawn, ObservationRenderer("real_image", 32, cell, seed=3).render(states, np.repeat(q, 2, 0)))
    twin_view = render_virtual("static", states, np.repeat(q, 2, 0), 32, 32, cell=cell)
    assert np.abs(drawn.astype(int) - twin_view).mean() > 20  # another table, block, robot, calibration, exposure
    assert np.abs(drawn[0].astype(int) - drawn[1]).mean() > 1  # and the block's place shows
    # offline evaluation: other realities than the training images'
    training = ObservationRenderer("real_image", 32, cell)
    training.render(states[:1], q)
    evaluation = renderer_of(untrained_policy(PolicyCfg(variant="real_image", image_size=32)), seed=0)
    evaluation.render(states[:1], q)
    assert not {look.cfg.seed for look in training._looks} & {look.cfg.seed for look in evaluation._looks}
    assert training.key != evaluation.key
    with pytest.raises(DataError, match="robot_q"):
        training.render(states, q)  # two states, one joint vector


def test_train_command(tiny_dataset, tmp_path, capsys):
    out = tmp_path / "cli"
    code = cli_main(["train", "--dataset", str(tiny_dataset), "--out", str(out), "--steps", "6", "--batch-size", "8",
                     "--checkpoint-every", "3", "--seed", "2", "--no-progress", "policy.hidden=64"])
    assert code == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["steps"] == 6 and (out / "step_000003.pt").is_file() and (out / "loss.png").is_file()
    assert cli_main(["train", "--dataset", str(tmp_path / "absent"), "--out", str(out), "--steps", "1"]) == 2


def test_camera_variant_trains_on_cached_renders_of_the_dataset_cell(tmp_path):
    from real_is_sim.config import to_yaml
    from real_is_sim_tasks.pusht import load_pusht_cfg

    root = write_synthetic_dataset(tmp_path / "dataset", to_yaml(load_pusht_cfg()))
    cfg = PolicyCfg(variant="wrist_camera", image_size=32, hidden=64)
    result = train(root, cfg, TrainCfg(steps=3, batch_size=4, frame_stride=10), tmp_path / "run", progress=False)
    assert (root / "cache" / "wrist_camera_32px.npy").is_file()
    assert len(np.load(root / "cache" / "wrist_camera_32px.npy")) == result.samples == 4 * FRAMES // 10
    policy, _ = load_checkpoint(result.checkpoint)
    assert policy.cfg.cell == to_yaml(load_pusht_cfg())  # inference renders the scene the data was recorded in
    poses, q = np.tile([0.5, 0, 0, 0, 0, 0, 1.0], (2, 1, 1)), np.tile(Q0, (2, 1))
    images = ObservationRenderer("wrist_camera", 32, load_pusht_cfg()).render(poses, q)
    assert policy.act(poses, q, images).shape == (2, 32, 8)


def test_state_noise_perturbs_the_current_frame_as_asked():
    # TrainCfg.state_noise: block x/y and yaw, and the joints, of the current frame; never z, never the history frame
    yaw = 0.7
    now = torch.zeros(4000, 14)
    now[:, 5], now[:, 6], now[:, 7:] = np.sin(yaw / 2), np.cos(yaw / 2), 0.3
    states = torch.cat([now, now], dim=1)  # a history frame after the current one
    cfg = PolicyCfg(variant="pose", history_frames=6)
    out = perturb_states(states, cfg, [0.005, 0.05, 0.02], torch.Generator().manual_seed(0))
    cos, sin = yaw_cos_sin(out[:, None, :7])
    turned = torch.atan2(sin, cos)[:, 0] - yaw
    assert turned.std().item() == pytest.approx(0.05, rel=0.1) and abs(turned.mean().item()) < 0.005
    assert out[:, :2].std(0).numpy() == pytest.approx([0.005, 0.005], rel=0.1)
    assert (out[:, 2] == 0).all() and (out[:, 14:] == states[:, 14:]).all()  # height and the history frame kept
    assert (out[:, 7:14] - 0.3).std().item() == pytest.approx(0.02, rel=0.1)
    assert torch.allclose(out[:, 3:7].norm(dim=1), torch.ones(len(out)), atol=1e-6)
    assert perturb_states(states, cfg, [0.0, 0.0, 0.0], torch.Generator()) is states
    with pytest.raises(ConfigError, match="state_noise"):
        TrainCfg(state_noise=[0.01, -0.1, 0.0])
