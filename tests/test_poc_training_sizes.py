"""The CLEVR-POC training-size table's records and report (experiments.poc_training_sizes)."""

from __future__ import annotations

from experiments.poc_training_sizes import (
    Folders,
    generate_commands,
    main,
    read_records,
    write_records,
)


def _record(player: str, size: int, exact: float, stages: list | None = None) -> dict:
    figures = {"items": 400, "exact": exact, "exact_ci": [exact - 0.03, exact + 0.03], "jaccard": 0.9, "errors": 0}
    return {"key": f"{player}@{size}", "player": player, "size": size, "minutes": 1.5, "command": "python -m x",
            "info": {"stages": stages} if stages else {}, "unseen": figures, "seen": {**figures, "exact": 0.99}}


def test_the_report_rebuilds_from_the_records_alone(tmp_path):
    stages = [{"stage": "supervised", "steps": 1500, "program_accuracy": 0.88, "answer_exact": 0.9},
              {"stage": "reinforce", "steps": 731, "program_accuracy": 0.95, "answer_exact": 0.965, "mean_reward": 0.94}]
    records = {r["key"]: r for r in (_record("poc-state-neuro-symbolic", 12000, 0.9575, stages),
                                      _record("poc-neural", 2000, 0.1225))}
    write_records(tmp_path / "training_sizes.jsonl", records)
    assert read_records(tmp_path / "training_sizes.jsonl") == records
    assert main(["--out", str(tmp_path), "--report-only"]) == 0
    report = (tmp_path / "training_sizes.md").read_text()
    assert "| poc-state-neuro-symbolic | 12,000 | 0.958 [0.927, 0.988] | 0.900 | 0.990" in report
    assert "| poc-state-neuro-symbolic | 12,000 | 300 | 0.88 / 0.9 | 731 | 0.95 / 0.965 | 0.94 |" in report
    assert report.index("poc-state-neuro-symbolic | 12,000") < report.index("poc-neural | 2,000")


def test_training_test_and_validation_items_come_from_disjoint_seeds(tmp_path):
    commands = generate_commands(Folders.under(tmp_path), (2000, 6000, 12000), 400)
    seeds = [command[command.index("--seed") + 1] for _, command in commands]
    assert len(set(seeds)) == 3
    train = commands[0][1]
    assert train[train.index("--items") + 1] == "12200" and "--check-visibility" in train
