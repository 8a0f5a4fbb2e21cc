"""The Blender renderer, with real bpy renders at tiny sizes in spawned worker processes."""

from __future__ import annotations

import gc
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from clevr_game.enforcers import BoundaryEnforcer
from clevr_game.errors import InputError
from clevr_game.render import Renderer, RenderWorkerError, read_png
from clevr_game.render.cache import RenderCache
from clevr_game.scene import DEFAULT_DIRECTIONS, Scene, SceneObject, load_scenes, project_to_pixels
from clevr_game.vocab import CLEVR_POC, COLOR_RGB

REPO = Path(__file__).resolve().parents[1]
W, H = 96, 64  # tiny, and CLEVR's 3:2 frame


def _scene(*objects: SceneObject, vocabulary=CLEVR_POC) -> Scene:
    return Scene(list(objects), vocabulary=vocabulary)


def _four_colours() -> Scene:
    return _scene(
        SceneObject("large", "red", "rubber", "cube", (-1.8, -1.2, 0.7), 30.0),
        SceneObject("large", "blue", "rubber", "sphere", (1.6, -1.6, 0.7)),
        SceneObject("medium", "green", "rubber", "cylinder", (-0.6, 2.0, 0.5)),
        SceneObject("large", "yellow", "rubber", "cone", (2.2, 1.8, 0.7)),
    )


def _hidden_behind_cube() -> Scene:
    """A small sphere straight behind a large cube, as the camera sees it; the layout is valid."""
    spot = np.array(DEFAULT_DIRECTIONS["behind"]) * 1.5 + np.array(DEFAULT_DIRECTIONS["right"]) * 0.45
    return _scene(
        SceneObject("large", "gray", "rubber", "cube", (0.0, 0.0, 0.7)),
        SceneObject("small", "red", "rubber", "sphere", (float(spot[0]), float(spot[1]), 0.35)),
    )


def _tint(rgb) -> np.ndarray | None:
    """The coloured part of a pixel (what is left above its gray level), as a unit vector; None for gray."""
    rgb = np.asarray(rgb, dtype=np.float64)
    tint = rgb - rgb.min()
    norm = np.linalg.norm(tint)
    return tint / norm if norm > 20 else None


def _nearest_colour(pixel, names: set[str]) -> str:
    """The CLEVR colour among `names` whose tint is closest to the pixel's; `gray` for an untinted pixel."""
    tint = _tint(pixel)
    if tint is None:
        return "gray"
    return max(names - {"gray"}, key=lambda name: float(_tint(COLOR_RGB[name]) @ tint))


def _assert_objects_at_their_pixels(image: np.ndarray, scene: Scene) -> None:
    height, width, _ = image.shape
    candidates = {o.color for o in scene.objects}
    for obj, (x, y, _) in zip(scene.objects, project_to_pixels(scene.coords(), width, height), strict=True):
        pixel = image[int(y), int(x)]
        assert _nearest_colour(pixel, candidates) == obj.color, (obj.describe(), (x, y), pixel)


@pytest.fixture(scope="module")
def fast(tmp_path_factory) -> Renderer:
    with Renderer("fast", width=W, height=H, index_size=(W, H),
                  cache_dir=tmp_path_factory.mktemp("cache")) as renderer:
        yield renderer


# ------------------------------------------------------------------ camera and colours


def test_pixel_coords_land_on_pixels_of_the_objects_colour(fast: Renderer) -> None:
    scene = _four_colours()
    _assert_objects_at_their_pixels(fast.render_array(scene), scene)


def test_cycles_preset_puts_objects_where_the_camera_projects_them(tmp_path: Path) -> None:
    scene, other = _four_colours(), _hidden_behind_cube()
    with Renderer("balanced", width=48, height=32, use_cache=False) as renderer:
        image = renderer.render_array(scene)
        between = renderer.render_array(other)
        again = renderer.render_array(scene)  # Cycles keeps its synced scene: moved objects must follow
    assert image.shape == (32, 48, 3)
    _assert_objects_at_their_pixels(image, scene)
    assert np.array_equal(again, image) and not np.array_equal(between, image)


def test_real_clevr_scene_objects_cover_their_pixel_coords(fast: Renderer, clevr_real: Path) -> None:
    scene = load_scenes(clevr_real / "CLEVR_val_scenes_sample11.json")[0]
    image = fast.render_array(scene)
    rubber = [o for o in scene.objects if o.material == "rubber"]
    # Metal mirrors its surroundings; rubber shows its own colour (gray included: untinted).
    for obj, (x, y, _) in zip(rubber, project_to_pixels(np.array([o.coords for o in rubber]), W, H), strict=True):
        assert _nearest_colour(image[int(y), int(x)], {o.color for o in scene.objects}) == obj.color
    assert min(fast.visible_pixels(scene)) > 0


# ------------------------------------------------------------------ visibility


def test_fully_hidden_object_fails_the_visibility_check(fast: Renderer) -> None:
    scene = _hidden_behind_cube()
    counts = fast.visible_pixels(scene)
    assert counts[0] > 100 and counts[1] == 0
    alone = _scene(scene.objects[1])  # the same sphere without the cube in front is plainly visible
    assert fast.visible_pixels(alone)[0] > 20
    verdict = BoundaryEnforcer(visibility=fast.hidden_objects).judge(scene)
    assert not verdict.ok and "object 1 (small red rubber sphere) is not visible" in verdict.reason
    assert BoundaryEnforcer(visibility=fast.hidden_objects).judge(alone).ok


def test_visible_pixels_follow_object_order_and_are_remembered(fast: Renderer) -> None:
    scene = _four_colours()
    counts = fast.visible_pixels(scene)
    reordered = _scene(*reversed(scene.objects))
    before = fast.stats.coverage_rendered
    assert fast.visible_pixels(reordered) == counts[::-1]
    assert fast.visible_pixels(scene) == counts
    assert fast.stats.coverage_rendered == before + 1  # the original order was answered from memory
    assert fast.visible_pixels(_scene()) == []


# ------------------------------------------------------------------ cache and in-place updates


def test_cache_returns_the_same_image_without_rendering(tmp_path: Path) -> None:
    scene = _four_colours()
    cache = tmp_path / "cache"
    with Renderer("fast", width=32, height=24, cache_dir=cache) as renderer:
        first = renderer.render(scene, tmp_path / "a.png")
        assert renderer.stats.rendered == 1
        second = renderer.render(_scene(*reversed(scene.objects)), tmp_path / "b.png")  # order does not matter
        assert renderer.stats.rendered == 1 and renderer.stats.cache_hits == 1
    assert first.read_bytes() == second.read_bytes()
    with Renderer("fast", width=32, height=24, cache_dir=cache) as again:
        image = again.render_array(scene)
        assert again.worker_pids() == [None]  # no Blender process was even started
    assert np.array_equal(image, read_png(first))
    assert RenderCache(cache).get(again.image_key(scene)) is not None


def test_objects_updated_in_place_give_the_same_image_as_a_fresh_scene(tmp_path: Path) -> None:
    few = _hidden_behind_cube()
    many = _scene(*_four_colours().objects, *few.objects[:1])  # two cubes: the pool grows
    with Renderer("fast", width=W, height=H, use_cache=False) as renderer:
        fresh = renderer.render_array(few)
        renderer.render_array(many)  # more objects: the pool grows, then spare objects are hidden
        assert np.array_equal(renderer.render_array(few), fresh)
        assert not np.array_equal(renderer.render_array(many), fresh)


# ------------------------------------------------------------------ workers


def _wait_until(condition: Callable[[], bool], what: str, timeout: float = 120.0) -> None:
    """Poll for an event; the timeout only bounds a test whose event never comes."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what} after {timeout:g} s")
        time.sleep(0.02)


def _dead(pid: int) -> bool:
    """True once `pid` has exited (a zombie not yet reaped counts)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in ("Z", "X")


def _cpu_seconds(pid: int) -> float:
    """User plus system time of every thread of `pid` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _kill_once_busy(pid: int, killed_busy: threading.Event, timeout: float = 120.0) -> None:
    """SIGKILL `pid` as soon as it has used 0.2 s of CPU: an idle worker blocks on its pipe and uses none."""
    idle = _cpu_seconds(pid)
    try:
        _wait_until(lambda: _cpu_seconds(pid) > idle + 0.2, f"worker {pid} to start rendering", timeout)
        killed_busy.set()
    except AssertionError:
        pass  # kill it anyway, so the test fails at once instead of waiting for a whole frame
    os.kill(pid, signal.SIGKILL)


def test_worker_crash_is_reported_and_the_worker_restarted(tmp_path: Path) -> None:
    reports: list[str] = []
    with Renderer("fast", width=32, height=24, use_cache=False, report=reports.append) as renderer:
        renderer.start()
        (pid,) = renderer.worker_pids()
        os.kill(pid, signal.SIGKILL)
        _wait_until(lambda: _dead(pid), f"worker {pid} to die")  # it died idle, before the job was sent
        image = renderer.render_array(_four_colours())  # the next job goes to a fresh worker
        assert image.shape == (24, 32, 3)
        assert renderer.restarts == 1 and renderer.worker_pids()[0] not in (None, pid)
        assert len(reports) == 1 and "SIGKILL" in reports[0] and "restarting" in reports[0]


def test_worker_killed_mid_render_raises_one_line_and_is_restarted(tmp_path: Path) -> None:
    # A full-size Cycles frame costs many CPU seconds: a kill as soon as the worker works lands mid-render.
    with Renderer("clevr", use_cache=False, retries=0, device="cpu") as renderer:
        renderer.start()
        (pid,) = renderer.worker_pids()
        killed_busy = threading.Event()
        killer = threading.Thread(target=_kill_once_busy, args=(pid, killed_busy))
        killer.start()
        try:
            with pytest.raises(RenderWorkerError) as raised:
                renderer.render(_four_colours(), tmp_path / "lost.png")
        finally:
            killer.join()
        assert killed_busy.is_set(), "the worker never started working on the job"
        message = str(raised.value)
        assert "\n" not in message
        assert f"render worker 0 (pid {pid}) was killed by SIGKILL while rendering lost.png" in message
        renderer.start()
        assert renderer.worker_pids()[0] not in (None, pid)
    assert list(tmp_path.iterdir()) == []


def test_worker_past_its_timeout_is_stopped_and_reported(tmp_path: Path) -> None:
    with Renderer("fast", width=32, height=24, use_cache=False, retries=0, job_timeout=0.5) as renderer:
        renderer.start()
        (pid,) = renderer.worker_pids()
        os.kill(pid, signal.SIGSTOP)  # hung, however fast it would render: the job can only time out
        with pytest.raises(RenderWorkerError, match="took longer than 0.5 s while rendering slow.png"):
            renderer.render(_four_colours(), tmp_path / "slow.png")
        assert renderer.worker_pids() == [None] and renderer.restarts == 1


def test_two_workers_render_clevr_named_images(tmp_path: Path) -> None:
    scenes = [_four_colours(), _hidden_behind_cube(), _scene()]
    for i, scene in enumerate(scenes):
        scene.split, scene.image_index = "val", 10 + i
    with Renderer("fast", width=32, height=24, use_cache=False, workers=2) as renderer:
        paths = renderer.render_many(scenes, tmp_path)
        assert len({pid for pid in renderer.worker_pids()}) == 2
    assert [p.name for p in paths] == ["CLEVR_val_000010.png", "CLEVR_val_000011.png", "CLEVR_val_000012.png"]
    assert all(read_png(p).shape == (24, 32, 3) for p in paths)
    assert not list(tmp_path.glob(".*"))  # no temporary files left behind


# ------------------------------------------------------------------ inputs, imports, command line


def test_bad_inputs_raise_one_line_input_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="unknown render preset 'slow'"):
        Renderer("slow")
    with pytest.raises(InputError, match="workers must be at least 1"):
        Renderer("fast", workers=0)
    with pytest.raises(InputError, match="missing base_scene.blend"):
        Renderer("fast", clevr_assets=tmp_path)
    with pytest.raises(InputError, match="height 400 exceeds width"):
        Renderer("fast", width=300, height=400)
    with Renderer("fast", use_cache=False) as renderer:
        bad = _scene(SceneObject("large", "red", "rubber", "torus", (0.0, 0.0, 0.7)))
        with pytest.raises(InputError, match="object 0: cannot render shape 'torus'"):
            renderer.render_array(bad)
        assert renderer.worker_pids() == [None]


def test_importing_the_package_does_not_import_blender() -> None:
    code = ("import sys, clevr_game, clevr_game.render, clevr_game.render.commands, clevr_game.cli; "
            "print(sorted(m for m in ('bpy', 'torch', 'gymnasium') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_render_command_writes_clevr_names_and_pixel_coords(tmp_path: Path) -> None:
    from clevr_game.cli import main

    scene = _four_colours()
    scene.split, scene.image_index = "new", 7
    scenes_file = tmp_path / "scenes.json"
    scenes_file.write_text(json.dumps({"info": {"split": "new"}, "scenes": [scene.to_json()]}))
    out = tmp_path / "images"
    argv = ["render", "--scenes", str(scenes_file), "--out", str(out), "--preset", "fast", "--width", "48",
            "--height", "32", "--cache-dir", str(tmp_path / "cache"), "--no-progress"]
    assert main(argv) == 0
    image = read_png(out / "CLEVR_new_000007.png")
    written = load_scenes(out / "scenes.json")[0]
    assert written.image_filename == "CLEVR_new_000007.png"
    expected = project_to_pixels(scene.coords(), 48, 32)
    assert [list(o.pixel_coords[:2]) for o in written.objects] == expected[:, :2].astype(int).tolist()
    _assert_objects_at_their_pixels(image, written)


def test_render_command_limit_renders_the_first_scenes_only(tmp_path: Path) -> None:
    from clevr_game.cli import main

    scenes = []
    for index in range(3):
        scene = _four_colours()
        scene.split, scene.image_index = "new", index
        scenes.append(scene.to_json())
    scenes_file = tmp_path / "scenes.json"
    scenes_file.write_text(json.dumps({"info": {"split": "new"}, "scenes": scenes}))
    out = tmp_path / "images"
    assert main(["render", "--scenes", str(scenes_file), "--out", str(out), "--preset", "fast", "--width", "48",
                 "--height", "32", "--cache-dir", str(tmp_path / "cache"), "--no-progress", "--limit", "2"]) == 0
    assert sorted(p.name for p in out.glob("*.png")) == ["CLEVR_new_000000.png", "CLEVR_new_000001.png"]
    assert [s.image_filename for s in load_scenes(out / "scenes.json")] == ["CLEVR_new_000000.png",
                                                                           "CLEVR_new_000001.png"]


def test_render_command_reports_a_bad_assets_folder(tmp_path: Path, capsys) -> None:
    from clevr_game.cli import main

    scenes_file = tmp_path / "scenes.json"
    scenes_file.write_text(json.dumps({"scenes": [_four_colours().to_json()]}))
    assert main(["render", "--scenes", str(scenes_file), "--out", str(tmp_path), "--clevr-assets",
                 str(tmp_path / "nowhere")]) == 2
    assert capsys.readouterr().err.strip() == f"clevr-game: error: --clevr-assets {tmp_path / 'nowhere'}: no such folder"


# ------------------------------------------------------------------ CLEVR's own assets


def test_clevr_assets_render_objects_at_their_pixel_coords() -> None:
    scene = _four_colours()
    scene.objects.pop()  # CLEVR's assets have no cone
    with Renderer("fast", width=W, height=H, index_size=(W, H), use_cache=False,
                  clevr_assets="clevr") as renderer:
        _assert_objects_at_their_pixels(renderer.render_array(scene), scene)
        assert renderer.hidden_objects(_hidden_behind_cube()) == [1]


def test_workers_end_when_a_renderer_is_dropped_without_close() -> None:
    renderer = Renderer("fast", width=32, height=24, use_cache=False)
    renderer.start()
    (pid,) = renderer.worker_pids()
    del renderer
    gc.collect()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # stopped and reaped, not even a zombie left
