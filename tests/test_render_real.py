"""The renderer on the real PushT footage (skips without the shared data)."""

import numpy as np
import pytest
import torch

from real_is_sim.gaussians import load_object_cloud
from real_is_sim_tasks.pusht.masks import red_orange_mask
from real_is_sim.render.pose_fit import silhouette_iou
from real_is_sim_tasks.pusht.real_check import DemoViews, fit_first_frame, load_demo_views, mean_block_colours, render_body
from real_is_sim.transforms import OPENGL_TO_OPENCV


@pytest.fixture(autouse=True)
def one_torch_thread():
    # On a loaded 2-core machine torch's intra-op threads make small ops ~100x slower (measured).
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def tblock(shared_data):
    cloud, scan_pose = load_object_cloud(shared_data / "objects" / "tblock.json")
    return cloud, scan_pose, load_demo_views(shared_data / "sample_demos" / "0")


def test_scan_pose_silhouette_overlaps_the_block_in_every_view(tblock):
    cloud, scan_pose, views = tblock
    _, alpha = render_body(cloud, scan_pose, views, backend="cpu")
    ious = [silhouette_iou(a, red_orange_mask(im)) for a, im in zip(alpha, views.images)]
    assert len(ious) == 2 and min(ious) > 0.15, ious
    # the same poses read as if they were OpenCV already: the block leaves the views
    wrong = DemoViews(views.serials, views.images, views.viewmats @ torch.tensor(OPENGL_TO_OPENCV, dtype=torch.float32),
                      views.Ks, views.width, views.height)
    _, alpha_wrong = render_body(cloud, scan_pose, wrong, backend="cpu")
    assert max(silhouette_iou(a, red_orange_mask(im)) for a, im in zip(alpha_wrong, views.images)) < 0.02


def test_pose_fit_on_the_first_frame_matches_both_views_with_the_red_face_up(shared_data, tblock):
    cloud, scan_pose, views = tblock
    first = fit_first_frame(shared_data, iters=60)
    fit = first.best
    # The T's outline is the same either face up; the Gaussians explain the footage better upside down.
    assert fit is first.fits["upside down"], {k: f.losses[-1] for k, f in first.fits.items()}
    assert min(fit.ious) >= 0.6, fit.ious
    assert abs(fit.pose[2] - scan_pose[2]) < 2e-3  # kept on the table: height unchanged
    assert np.linalg.norm(fit.pose[:2] - scan_pose[:2]) > 0.01  # the block did move since the scan
    errors = {}
    for start, start_fit in first.fits.items():
        rgb, alpha = render_body(cloud, start_fit.pose, views, backend="cpu")
        errors[start] = []
        for c, image in enumerate(views.images):
            rendered, real = mean_block_colours(rgb[c], alpha[c], image)
            # RGB order is right (BGR would make blue the strongest channel)
            assert rendered[0] > rendered[1] > rendered[2] and real[0] > real[1] > real[2]
            errors[start].append(np.abs(rendered - real))
    kept, other = np.array(errors["upside down"]), np.array(errors["as scanned"])
    # Red within 0.1 everywhere; the red face up halves the worst green/blue error (0.32 -> < 0.15).
    # View 220422302296 still sees G/B ~0.12 too bright (the scan's colours, docs/render.md): not asserted.
    assert kept[:, 0].max() < 0.1 and kept.max() < 0.15 and other.max() > 2 * kept.max(), errors
    assert kept[views.serials.index("234222302164")].max() < 0.1, errors
