"""Short questions first: the curriculum's batches, its hand-over to the epochs, and a pixel run that uses it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from clevr_game.errors import InputError
from clevr_game.generate import generate_dataset
from players.pixel.images import ImageSpec, ensure_images
from players.pixel.training import PixelTrainingOptions, train_pixel
from players.state.training import BatchSchedule, CurriculumSchedule

SPEC = ImageSpec("fast", 64, 48)
TINY_FILM = {"stem_channels": 12, "stem_layers": 2, "width": 24, "blocks": 2, "word_width": 16,
             "question_width": 32, "classifier_width": 32}


def test_early_batches_hold_only_the_shortest_questions_and_the_share_grows():
    lengths = torch.from_numpy(np.random.default_rng(0).integers(4, 40, size=1000))
    schedule = CurriculumSchedule(lengths, batch_size=16, seed=3, steps=100)
    order = torch.argsort(lengths, stable=True)
    shortest = set(order[:200].tolist())  # the first step draws from the shortest 20%
    assert set(schedule.indices(0).tolist()) <= shortest
    assert schedule.share(0) == pytest.approx(0.2) and schedule.share(50) == pytest.approx(0.6)
    assert lengths[schedule.indices(1)].float().mean() < lengths.float().mean() - 5
    late = torch.cat([schedule.indices(step) for step in range(90, 100)])
    assert not set(late.tolist()) <= shortest  # by the end it draws from nearly all of them
    # A resumed run rebuilds the same batches from the step alone; after the curriculum come the epochs.
    again = CurriculumSchedule(lengths, batch_size=16, seed=3, steps=100)
    assert all(torch.equal(schedule.indices(s), again.indices(s)) for s in (0, 37, 99, 100, 250))
    epochs = BatchSchedule(lengths, 16, seed=3)
    assert torch.equal(schedule.indices(100), epochs.indices(0)) and torch.equal(schedule.indices(163), epochs.indices(63))
    for step in (0, 50):  # no question twice in one batch
        assert len(set(schedule.indices(step).tolist())) == 16


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("curriculum") / "train"
    generate_dataset(folder, 20, 6, seed=41, progress=False)
    ensure_images(folder, SPEC)
    return folder


def test_film_trains_with_a_curriculum_and_resumes_only_with_the_same_one(rendered: Path, tmp_path: Path):
    def options(**changes) -> PixelTrainingOptions:
        base = {"player": "film", "data": str(rendered), "out": str(tmp_path / "film.pt"), "preset": SPEC.preset,
                "width": SPEC.width, "height": SPEC.height, "steps": 80, "batch_size": 16, "learning_rate": 3e-3,
                "warmup_steps": 10, "model_config": TINY_FILM, "log_dir": "", "progress": False,
                "curriculum_steps": 40, "max_minutes": None}
        return PixelTrainingOptions(**{**base, **changes})

    first = train_pixel(options(max_minutes=1e-9))  # stopped at once: a checkpoint to resume
    finished = train_pixel(options(resume=True))
    assert finished.step == 80 > first.step
    assert finished.final_loss < finished.first_loss - 0.3
    with pytest.raises(InputError, match="curriculum_steps=40, not 0"):
        train_pixel(options(resume=True, steps=120, curriculum_steps=0))
