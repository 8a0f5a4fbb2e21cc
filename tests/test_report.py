"""The benchmark report as a user gets it: from `clevr-game benchmark` on a tiny real run to the page in a browser.

One module-wide run of the CLI against a position-sensitive subprocess player
(it answers from where objects stand, so moves change its answers) feeds every
test here; report rebuilds go to copies of that folder.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from benchmarks.report import build_report, curve_account, size_plot
from benchmarks.runner import Progress, read_trials, run_plan
from benchmarks.stats import breakdown
from benchmarks.trials import Plan
from clevr_game.errors import InputError
from clevr_game.generate import generate_dataset
from clevr_game.render.renderer import read_png
from clevr_game.text import default_word_vocabulary
from players.state.checkpoint import player_file_from, save_player_file
from players.state.features import ANSWERS
from players.state.models import build_model

REPO = Path(__file__).resolve().parents[1]
TINY_RN = {"width": 32, "word_width": 16, "question_width": 32, "g_layers": 2, "f_width": 32, "dropout": 0.0}

# Right on every unmoved scene (it reads the items' answers), and from positions only once a scene
# moved: counts and yes/no flip with the x of objects, attribute questions name the object nearest the
# centre, so almost any move can break a right answer.
POSITIONAL_PLAYER = """
import json, sys
from envs.items import load_items
ITEMS = {it.item_id: it for it in load_items(sys.argv[1])}
ATTRIBUTES = (("color", "color"), ("size", "size"), ("material", "material"), ("made of", "material"),
              ("shape", "shape"))
for line in sys.stdin:
    query = json.loads(line)
    objects = query["scene"]["objects"]
    item = ITEMS[query["id"]]
    if [o["3d_coords"] for o in objects] == [list(o.coords) for o in item.scene.objects]:
        print(json.dumps({"id": query["id"], "answer": item.answer}), flush=True)
        continue
    text = query["question"].lower()
    nearest = min(objects, key=lambda o: abs(o["3d_coords"][0]) + abs(o["3d_coords"][1]))
    asked = [attribute for word, attribute in ATTRIBUTES if word in text]
    if "number" in text or text.startswith("how many"):
        answer = str(sum(o["3d_coords"][0] > 0 for o in objects))
    elif asked and text.startswith(("what", "which", "the ")):
        answer = nearest[asked[0]]
    else:
        answer = "yes" if objects[0]["3d_coords"][0] > 0 else "no"
    print(json.dumps({"id": query["id"], "answer": answer}), flush=True)
"""


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    """A finished `clevr-game benchmark` run: its folder and what it printed."""
    root = tmp_path_factory.mktemp("report")
    generate_dataset(root / "items", 30, 1, seed=3, progress=False)
    torch.manual_seed(0)
    words = default_word_vocabulary()
    network = build_model("relation-network", TINY_RN, len(words), len(ANSWERS))
    save_player_file(root / "rn.pt", player_file_from(network, "relation-network", words, list(ANSWERS), {}))
    (root / "positional.py").write_text(POSITIONAL_PLAYER)
    player = f"subprocess:{sys.executable} {root / 'positional.py'} {root / 'items'}"
    command = [sys.executable, "-m", "clevr_game.cli", "benchmark", "--players", f"oracle,{player}",
               "--items", str(root / "items"), "--sizes", "10", "--minigames", "2", "--seeds", "1",
               "--steps", "256", "--workers", "1", "--out", str(root / "results"), "--no-progress",
               "--adversary-weights", str(root / "rn.pt")]
    # A fresh render cache: the gallery must be rendered by this run, not found from an earlier one.
    env = dict(os.environ, PYTHONPATH=str(REPO), CLEVR_GAME_RENDER_CACHE=str(root / "render-cache"))
    done = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return root / "results", done.stdout, player


def _copy(results: Path, to: Path) -> Path:
    shutil.copytree(results, to, ignore=shutil.ignore_patterns("runs"))
    # The run folders stay where trials.jsonl says they are; only the report's own files are copied.
    return to


# ------------------------------------------------------------------ progress


def test_benchmark_prints_a_progress_line_per_trial(bench):
    _, stdout, _ = bench
    lines = [line for line in stdout.splitlines() if line.startswith("[")]
    assert len(lines) == 4
    for done, line in enumerate(lines, start=1):
        assert re.match(rf"\[{done}/4\] \d+:\d\d:\d\d elapsed, ~\d+:\d\d:\d\d left  \S+__size10__mg\d__seed0: "
                        r"consistency \d\.\d{3} drop \d\.\d{3} \(\d+ s\)$", line), line
    assert lines[-1].split(", ~")[1].startswith("0:00:00 left")


def test_progress_counts_trials_recorded_before_a_resumed_run(tmp_path):
    generate_dataset(tmp_path / "items", 20, 1, seed=5, progress=False)
    plan = Plan(players=["oracle"], items=str(tmp_path / "items"), sizes=[10], minigames=2, seeds=1, steps=64,
                out=str(tmp_path / "out"), num_envs=64, eval_samples=2, search_budget=0)
    first = replace(plan, minigames=1)
    run_plan(first, workers=1)
    seen: list[Progress] = []
    run_plan(plan, workers=1, on_progress=seen.append)
    # mini-game 0 was recorded by the first run: this run starts at 1 of 2 and says so.
    assert [(p.done, p.total) for p in seen] == [(2, 2)]
    assert seen[0].record["trial"].endswith("mg1__seed0") and seen[0].remaining_s == 0.0
    assert seen[0].line().startswith("[2/2] ")


# ------------------------------------------------------------------ the report's parts


def test_gallery_shows_distinct_items_rendered_with_their_moves(bench):
    results, _, _ = bench
    md = (results / "report.md").read_text()
    shown = re.findall(r"!\[([^\]]*)\]\((gallery_\d+\.png)\)", md)
    assert 2 <= len(shown) <= 6
    assert len({item for item, _ in shown}) == len(shown), "an item shown twice"
    assert "Rendered with the `fast` preset" in md
    for _, image in shown:
        pixels = read_png(results / image)
        # two 480 x 320 renders side by side plus titles; the renders are not blank
        assert pixels.shape[1] >= 900 and pixels.shape[0] >= 320
        assert pixels[:, :, :].std() > 20
    # the captions carry the question and the three answers in full
    caption = next(line for line in md.splitlines() if "true answer:" in line and "moved:" in line)
    assert re.search(r"true answer: \S+; before: \S+; after: \S+ \(right answer broken\)", caption)
    # only right answers broken, never a wrong one changed or turned right
    captions = json.loads((results / "gallery.json").read_text())["entries"]
    assert captions and all(e["dropped"] and e["old"] == e["true"] != e["new"] for e in captions)


def test_the_gallery_keeps_only_scenes_that_obey_every_clevr_rule():
    from benchmarks.gallery import breaks_a_clevr_rule
    from clevr_game.scene import Scene, SceneObject

    def scene(*objects):
        return Scene([SceneObject(size, "red", "rubber", "cube", (x, y, 0.7 if size == "large" else 0.35))
                      for x, y, size in objects])

    assert breaks_a_clevr_rule(scene((0.0, 0.0, "large"), (2.0, 1.0, "small"))) is None
    # a small cube behind a large one, as the camera sees it: the layout keeps every rule, the picture does not
    hidden = scene((0.0, 0.0, "large"), (-2.4, 1.2, "small"))
    assert breaks_a_clevr_rule(hidden) == "object 1 (small red rubber cube) shows fewer than CLEVR's 200 pixels"
    assert "overlap" in breaks_a_clevr_rule(scene((0.0, 0.0, "large"), (0.5, 0.5, "large")))


def test_the_report_says_how_its_trials_were_made_and_folds_what_they_cannot_answer(bench):
    results, _, player = bench
    md = (results / "report.md").read_text()
    info = json.loads((results / "run_info.json").read_text())
    assert info["command"].startswith("clevr-game benchmark --players ") and info["cores"] >= 1
    assert "## How these trials were made" in md and f"- cores: {info['cores']}" in md
    assert f"- date: {info['date']}" in md and "- clevr-game version: " in md
    # one size, one adversary: questions 1 and 2 are one line each, folded away in the HTML page
    assert "**2. Drop vs mini-game size**: not answered by these trials: the trials cover one mini-game size" in md
    assert "## 2. Drop vs mini-game size" not in md
    assert "<details><summary>1. State-input vs pixel-input adversary" in (results / "report.html").read_text()


def test_gallery_falls_back_to_schematic_views_when_blender_cannot_start(bench, tmp_path, monkeypatch):
    results, _, _ = bench
    copy = _copy(results, tmp_path / "results")
    # A `bpy` that fails to import shadows Blender's in the render workers (spawned with this sys.path);
    # the empty cache makes the renderer start them.
    (tmp_path / "no_blender").mkdir()
    (tmp_path / "no_blender" / "bpy.py").write_text("raise ImportError('Blender is not installed here')\n")
    monkeypatch.syspath_prepend(str(tmp_path / "no_blender"))
    monkeypatch.setenv("CLEVR_GAME_RENDER_CACHE", str(tmp_path / "empty-cache"))
    md, _ = build_report(copy)
    text = md.read_text()
    assert "Blender could not render the gallery" in text and "Blender is not installed here" in text
    assert "schematic top views" in text and (copy / "gallery_0.png").is_file()


def test_schematic_preset_and_an_unknown_preset(bench, tmp_path):
    results, _, _ = bench
    copy = _copy(results, tmp_path / "results")
    md, _ = build_report(copy, gallery_preset="schematic")
    assert "Rendered with" not in md.read_text() and (copy / "gallery_0.png").is_file()
    with pytest.raises(InputError, match="unknown gallery preset 'fancy'"):
        build_report(copy, gallery_preset="fancy")


def test_metric_definitions_are_in_both_pages(bench):
    results, _, _ = bench
    md, page = (results / "report.md").read_text(), (results / "report.html").read_text()
    for term in ("consistency", "drop", "drop p vs random", "player errors", "family, kind"):
        assert f"**{term}**" in md and f"<dt>{term}</dt>" in page


def test_family_breakdown_matches_the_item_results(bench):
    results, _, player = bench
    families = json.loads((results / "families.json").read_text())
    questions = json.loads((results.parent / "items" / "questions.json").read_text())
    questions = questions["questions"] if isinstance(questions, dict) else questions
    template_of = {f"{q['image_index']}:{q['question_index']}": q["template_filename"][:-5] for q in questions}
    expected: dict[str, list[float]] = {}
    for record in read_trials(results).values():
        if record["player"] != player:
            continue
        for item in json.loads((Path(record["run"]) / "result.json").read_text())["items"]:
            assert item["family"] is not None and item["question_kind"] in ("count", "exist", "compare", "query")
            expected.setdefault(template_of[item["item_id"]], []).append(item["dropped_share"])
    rows = {r["family"]: r for r in families["family"] if r["player"] == player}
    assert set(rows) == set(expected)
    for family, drops in expected.items():
        assert rows[family]["drop"]["mean"] == pytest.approx(sum(drops) / len(drops))
        assert rows[family]["items"] == len(drops)
    md = (results / "report.md").read_text()
    assert "## By question family" in md and "| player | family |" in md and "| player | kind |" in md
    assert (results / "families.png").stat().st_size > 0


def test_family_breakdown_of_older_results_looks_families_up_in_the_items_folder(bench, tmp_path):
    results, _, player = bench
    copy = _copy(results, tmp_path / "results")
    runs = tmp_path / "runs"
    trials = read_trials(copy)
    for record in trials.values():  # result.json as written before items carried their family
        result = json.loads((Path(record["run"]) / "result.json").read_text())
        for item in result["items"]:
            del item["family"], item["question_kind"]
        (runs / record["trial"]).mkdir(parents=True)
        (runs / record["trial"] / "result.json").write_text(json.dumps(result))
        record["run"] = str(runs / record["trial"])
    (copy / "trials.jsonl").write_text("".join(json.dumps(r) + "\n" for r in trials.values()))
    build_report(copy, gallery_preset="schematic")
    assert json.loads((copy / "families.json").read_text()) == json.loads((results / "families.json").read_text())


def test_breakdown_leaves_nothing_out():
    items = [{"player": "p", "item_id": "1:1", "family": "zero_hop", "changed_share": 0.5, "dropped_share": 0.25},
             {"player": "p", "item_id": "1:1", "family": "zero_hop", "changed_share": 0.0, "dropped_share": 0.0},
             {"player": "p", "item_id": "2:2", "family": "one_hop", "changed_share": 1.0, "dropped_share": 1.0}]
    rows = {r["family"]: r for r in breakdown(items, "family")}
    assert rows["zero_hop"]["consistency"]["mean"] == 0.25 and rows["zero_hop"]["drop"]["mean"] == 0.125
    assert rows["zero_hop"]["items"] == 2 and rows["zero_hop"]["distinct_items"] == 1
    assert rows["one_hop"]["drop"]["ci95"] == [1.0, 1.0]


def test_learning_curve_account_says_what_the_curves_did():
    rising = {"steps": [64, 128, 192, 256, 320], "reward": [-0.6, -0.5, -0.3, -0.2, -0.1],
              "invalid": [0.8, 0.6, 0.4, 0.2, 0.1], "changed": [0.0, 0.01, 0.02, 0.03, 0.04],
              "dropped": [0.0, 0.0, 0.0, 0.0, 0.0]}
    records = [{"player": "p", "curve": rising}, {"player": "old", "curve": {k: v for k, v in rising.items()
                                                                              if k != "dropped"}}]
    first, second = curve_account(records)
    assert first.startswith("old:") and "dropped share was not recorded" in first
    assert second == ("p: over 320 training steps (1 trial(s), first fifth of training against the last) the "
                      "invalid share fell from 0.80 to 0.10, the changed share rose from 0.000 to 0.040, the "
                      "dropped share stayed at about 0.000 and the mean reward rose from -0.60 to -0.10.")


def test_one_mini_game_size_is_drawn_as_bars_not_a_point_on_a_log_axis(bench, tmp_path):
    results, _, _ = bench
    rows = json.loads((results / "table.json").read_text())
    one = size_plot(rows, tmp_path / "one.png").axes[0]
    several = size_plot(rows + [dict(r, size=100) for r in rows], tmp_path / "two.png").axes[0]
    assert one.get_xscale() == "linear" and len(one.patches) == 8  # 2 players x 4 adversaries
    assert several.get_xscale() == "log" and not several.patches and len(several.lines) > 0


# ------------------------------------------------------------------ the page in a browser


def _chromium() -> str:
    """The browser, installed from Debian's packages when missing; skips the test with the reason it cannot."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found
    if shutil.which("apt-get") is None or os.geteuid() != 0:
        pytest.skip("chromium is not installed and apt-get cannot install it here (no apt-get or not root)")
    for attempt in (["apt-get", "install", "-y", "chromium"], ["apt-get", "update"],
                    ["apt-get", "install", "-y", "chromium"]):
        try:
            done = subprocess.run(attempt, capture_output=True, text=True, timeout=600,
                                  env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
        except subprocess.TimeoutExpired:
            pytest.skip(f"`{' '.join(attempt)}` took over 10 minutes")
        if attempt[1] == "install" and done.returncode == 0:
            return shutil.which("chromium") or pytest.skip("apt-get installed chromium but it is not on PATH")
    reason = (done.stderr.strip().splitlines() or ["no output"])[-1]
    pytest.skip(f"chromium could not be installed with apt-get: {reason}")


# Records what the browser made of each image once the page has loaded.
_PROBE = """<script>window.addEventListener('load', () => {
  for (const img of document.images) img.setAttribute('data-loaded-width', img.naturalWidth);
  document.body.setAttribute('data-probed', 'yes');
});</script>"""


@pytest.mark.slow  # 20 s of headless Chromium; the page's HTML is checked by the tests above
def test_report_page_loads_in_a_browser_with_images_and_tables(bench, tmp_path):
    browser = _chromium()
    results, _, _ = bench
    probe = results / "probe.html"
    probe.write_text((results / "report.html").read_text().replace("</body>", _PROBE + "</body>"))
    flags = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"]
    try:
        dom = subprocess.run(flags + ["--virtual-time-budget=10000", "--dump-dom", probe.as_uri()],
                             capture_output=True, text=True, timeout=60).stdout
    finally:
        probe.unlink()
    assert 'data-probed="yes"' in dom
    images = re.findall(r"<img [^>]*>", dom)
    assert len(images) >= 5  # drop plot, learning curves, families, gallery
    for image in images:
        width = re.search(r'data-loaded-width="(\d+)"', image)
        assert width and int(width.group(1)) > 0, f"image did not load: {image}"
    page = (results / "report.html").read_text()
    assert dom.count("<table>") == page.count("<table>") >= 3
    assert "What the numbers mean" in dom and "Learning curves" in dom
    shot = tmp_path / "report.png"
    subprocess.run(flags + ["--window-size=1280,3000", f"--screenshot={shot}", (results / "report.html").as_uri()],
                   capture_output=True, timeout=60, check=True)
    pixels = read_png(shot)
    assert pixels.shape[:2] == (3000, 1280) and len({tuple(p) for p in pixels[::20, ::20].reshape(-1, 3)}) > 50
