"""``rlvr compare``: final and best values from hand-written run folders, skipped metrics, bad folders, PNGs.

The synthetic runs' metrics are written here by hand, so every expected value below is read
off the rows, not captured from the code.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from rlvr_plugins import cli
from rlvr_plugins.lab.compare import summarize
from rlvr_plugins.train import curves
from rlvr_plugins.train.curves import TRAIN_ACCURACY, load_run, smooth

REPO = Path(__file__).resolve().parents[1]
SMOKE = REPO / "tests" / "configs" / "smoke.yaml"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def rows_from_columns(steps: list[int], columns: dict[str, list]) -> list[dict]:
    """``metrics.jsonl`` rows, one per step, from one list of values per metric."""
    return [{"step": step, **{name: values[i] for name, values in columns.items()}} for i, step in enumerate(steps)]


# Run "grpo-run": steps 1-4, every metric (training accuracy from rlvr/correct_rate); a null kl at step 3 (non-finite values are logged as null)
# and TRL's end-of-training row sharing step 4.
GRPO_ROWS = rows_from_columns(
    [1, 2, 3, 4],
    {
        "reward": [0.2, 0.6, 0.5, 0.4],
        "rewards/r1-accuracy/mean": [0.0, 0.5, 0.25, 0.25],
        "rewards/r1-format/mean": [0.4, 0.2, 0.5, 0.3],
        "rlvr/correct_rate": [0.0, 0.4, 0.3, 0.2],
        "kl": [0.01, 0.03, None, 0.05],
        "entropy": [2.0, 1.5, 1.8, 1.2],
        "completions/mean_length": [10.0, 20.0, 30.0, 40.0],
        "completions/mean_length_correct": [8.0, 18.0, 25.0, 30.0],
        "completions/mean_length_wrong": [11.0, 22.0, 35.0, 50.0],
        "clip_ratio/low_mean": [0.0, 0.02, 0.01, 0.03],
        "clip_ratio/high_mean": [0.1, 0.0, 0.01, 0.02],
        "clip_ratio/region_mean": [0.1, 0.02, 0.02, 0.05],
    },
) + [{"step": 4, "train_runtime": 1.5, "train_loss": 0.0, "epoch": 1.0}]
GRPO_SUMMARY = {"eval_before": {"accuracy": 0.25, "n": 8}, "eval_after": {"accuracy": 0.5, "n": 8}}

# Run "rloo-run": logs every 2 steps, no rlvr/correct_rate (accuracy from the reward mean), no kl, no length split, a length penalty, no summary.json (unfinished).
RLOO_ROWS = rows_from_columns(
    [2, 4, 6],
    {
        "reward": [0.1, 0.3, 0.2],
        "rewards/r1-accuracy/mean": [0.1, 0.3, 0.2],
        "rewards/r1-format/mean": [0.0, 0.0, 0.0],
        "entropy": [3.0, 2.5, 2.7],
        "completions/mean_length": [50.0, 45.0, 40.0],
        "penalties/kimi-length/mean": [-0.2, -0.1, -0.3],
        "clip_ratio/low_mean": [0.0, 0.0, 0.0],
        "clip_ratio/high_mean": [0.0, 0.0, 0.0],
        "clip_ratio/region_mean": [0.0, 0.0, 0.0],
    },
)


def plugins_json(estimator: str, chosen: list[str]) -> dict:
    described = [{"name": n, "default": False, "hooks": ["rlvr_reward_functions"]} for n in chosen]
    described.append({"name": estimator, "default": estimator == "grpo", "hooks": ["rlvr_compute_advantages"]})
    rewards = [{"plugin": n, "name": n, "weight": 1.0} for n in chosen if n.startswith("r1-")]
    return {"plugins": described, "rewards": rewards}


def write_run(
    folder: Path, rows: list[dict], summary: dict | None = None, plugins: dict | None = None, config: dict | None = None
) -> Path:
    folder.mkdir(parents=True)
    (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    if summary is not None:
        (folder / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    if plugins is not None:
        (folder / "plugins.json").write_text(json.dumps(plugins), encoding="utf-8")
    if config is not None:
        (folder / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    return folder


@pytest.fixture
def runs(tmp_path) -> tuple[Path, Path]:
    grpo = write_run(
        tmp_path / "grpo-run",
        GRPO_ROWS,
        GRPO_SUMMARY,
        plugins_json("grpo", ["r1-accuracy", "r1-format"]),
        {"plugins": {"r1-accuracy": {}, "r1-format": {}}, "eval": {"reward": "r1-accuracy"}},
    )
    rloo = write_run(
        tmp_path / "rloo-run",
        RLOO_ROWS,
        None,
        plugins_json("rloo", ["r1-accuracy", "r1-format", "kimi-length"]),
        {"plugins": {"r1-accuracy": {}, "r1-format": {}, "kimi-length": {}, "rloo": {}}},
    )
    return grpo, rloo


def compare_cli(*args: str) -> int:
    return cli.main(["compare", *args])


def read_result_of(run: Path, out: Path) -> dict:
    assert compare_cli(str(run), "--output", str(out), "--no-plots") == 0
    return read_result(out)


def read_result(out: Path) -> dict:
    return json.loads((out / "compare.json").read_text(encoding="utf-8"))


def table_rows(out: Path) -> dict[str, dict[str, str]]:
    """compare.md's table as ``{run label: {column header: cell}}``."""
    lines = [line for line in (out / "compare.md").read_text(encoding="utf-8").splitlines() if line.startswith("|")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in lines[2:]]
    return {row[0]: dict(zip(header, row)) for row in rows}


# -- values ----------------------------------------------------------------------------------


def test_final_and_best_values_in_the_table_and_json(runs, tmp_path):
    out = tmp_path / "out"
    assert compare_cli(*map(str, runs), "--output", str(out), "--no-plots") == 0
    table = table_rows(out)
    grpo, rloo = table["grpo-run"], table["rloo-run"]
    assert grpo["estimator"] == "grpo" and grpo["plugins"] == "r1-accuracy, r1-format" and grpo["steps"] == "4"
    assert rloo["estimator"] == "rloo" and rloo["plugins"] == "r1-accuracy, r1-format, kimi-length, rloo"
    assert rloo["steps"] == "6"
    assert grpo["reward ↑"] == "0.4 / 0.6"
    assert grpo["rewards/r1-accuracy/mean ↑"] == "0.25 / 0.5"
    assert grpo["accuracy/train ↑"] == "0.2 / 0.4"
    assert rloo["accuracy/train ↑"] == "0.2 / 0.3"
    assert grpo["kl ↓"] == "0.05 / 0.01"
    assert grpo["entropy ↕"] == "1.2 / 1.2–2"
    assert grpo["completions/mean_length_correct ↕"] == "30 / 8–30"
    assert grpo["completions/mean_length_wrong ↕"] == "50 / 11–50"
    assert grpo["clip_ratio/region_mean ↓"] == "0.05 / 0.02"
    assert grpo["held-out acc. before"] == "25.0%" and grpo["held-out acc. after"] == "50.0%"
    assert rloo["reward ↑"] == "0.2 / 0.3"
    assert rloo["penalties/kimi-length/mean ↑"] == "-0.3 / -0.1"
    assert grpo["penalties/kimi-length/mean ↑"] == "-"

    result = read_result(out)
    by_label = {r["label"]: r for r in result["runs"]}
    kl = by_label["grpo-run"]["metrics"]["kl"]
    assert (kl["final"], kl["final_step"], kl["best"], kl["best_step"], kl["better"]) == (0.05, 4, 0.01, 1, "min")
    reward = by_label["grpo-run"]["metrics"]["reward"]
    assert (reward["best"], reward["best_step"], reward["better"]) == (0.6, 2, "max")
    entropy = by_label["grpo-run"]["metrics"]["entropy"]
    assert entropy["better"] is None and "best" not in entropy and (entropy["min"], entropy["max"]) == (1.2, 2.0)
    assert by_label["grpo-run"]["accuracy_key"] == "rlvr/correct_rate"
    assert by_label["rloo-run"]["accuracy_key"] == "rewards/r1-accuracy/mean"
    assert by_label["rloo-run"]["correctness_reward"] == "r1-accuracy"
    assert by_label["grpo-run"]["eval_accuracy"] == {"before": 0.25, "after": 0.5}
    assert by_label["rloo-run"]["eval_accuracy"] == {"before": None, "after": None}


def test_smoothing_is_a_trailing_mean_and_applies_to_the_table(runs, tmp_path):
    out = tmp_path / "out"
    assert compare_cli(str(runs[0]), "--smooth", "2", "--output", str(out), "--no-plots") == 0
    reward = read_result(out)["runs"][0]["metrics"]["reward"]
    # rewards 0.2, 0.6, 0.5, 0.4 -> trailing means over 2: 0.2, 0.4, 0.55, 0.45
    assert reward["final"] == pytest.approx(0.45) and reward["best"] == pytest.approx(0.55)
    assert reward["best_step"] == 3
    assert read_result(out)["smooth"] == 2
    assert "trailing mean over 2 logged steps" in (out / "compare.md").read_text(encoding="utf-8")


def test_ema_is_tensorboards_debiased_smoothing_by_hand():
    # weight 0.6: last = 0.4*1 = 0.4 -> 0.4/0.4 = 1; last = 0.24 + 0.4*3 = 1.44 -> 1.44/0.64 = 2.25;
    # last = 0.864 + 0 = 0.864 -> 0.864/0.784
    smoothed = curves.ema([(1, 1.0), (2, 3.0), (5, 0.0)], 0.6)
    assert [s for s, _ in smoothed] == [1, 2, 5]
    assert [v for _, v in smoothed] == pytest.approx([1.0, 2.25, 0.864 / 0.784])
    assert curves.ema([(1, 1.0), (2, 3.0)], 0.0) == [(1, 1.0), (2, 3.0)]
    assert [v for _, v in curves.ema([(1, 5.0), (2, 5.0), (3, 5.0)], 0.9)] == pytest.approx([5.0] * 3)
    with pytest.raises(ValueError, match=r"EMA weight must be in \[0, 1\), got 1.0"):
        curves.ema([(1, 1.0)], 1.0)


def test_metric_glob_plots_and_tabulates_every_match(runs, tmp_path, capsys):
    out = tmp_path / "out"
    assert (
        compare_cli(
            str(runs[0]), "--output", str(out), "--metric", "clip_ratio/*_mean", "--metric", "entropy", "--ema", "0.5"
        )
        == 0
    )
    result = read_result(out)
    names = [m["name"] for m in result["metrics"]]
    assert len(names) == len(set(names)), "a metric of a --metric group and a built-in one is tabulated once"
    assert "metric-clip_ratio__mean.png" in result["plots"] and "metric-entropy.png" in result["plots"]
    assert_drawn(out / "metric-clip_ratio__mean.png")
    assert (out / "metric-entropy.png").read_bytes().startswith(PNG_MAGIC)


def test_metric_that_matches_nothing_is_refused_with_what_was_logged(runs, capsys):
    assert compare_cli(str(runs[0]), "--metric", "nope/*", "--no-plots") == 2
    err = capsys.readouterr().err
    assert "--metric 'nope/*': no run logged a matching metric; logged: ['reward', " in err


@pytest.mark.parametrize("weight", ["1", "-0.1", "x"])
def test_ema_weight_must_be_in_unit_interval(runs, capsys, weight):
    with pytest.raises(SystemExit) as exc:
        compare_cli(str(runs[0]), "--ema", weight)
    assert (
        exc.value.code == 2
        and f"--ema takes a weight in [0, 1) (0: no smoothing), got '{weight}'" in capsys.readouterr().err
    )


def test_smooth_and_summarize_by_hand():
    assert smooth([(1, 1.0), (2, 3.0), (5, 5.0), (6, 0.0)], 3) == [(1, 1.0), (2, 2.0), (5, 3.0), (6, 8 / 3)]
    assert smooth([(1, 1.0), (2, 3.0)], 1) == [(1, 1.0), (2, 3.0)]
    assert summarize([], "max") is None
    low = summarize([(1, 0.3), (2, 0.1), (3, 0.1), (4, 0.2)], "min")
    assert (low["best"], low["best_step"], low["final"]) == (0.1, 2, 0.2)
    with pytest.raises(ValueError):
        smooth([(1, 1.0)], 0)


def test_rows_of_one_step_are_merged_and_nulls_dropped(runs):
    run = load_run(runs[0])
    assert run.series("kl") == [(1, 0.01), (2, 0.03), (4, 0.05)]
    assert run.rows[4]["train_runtime"] == 1.5 and run.rows[4]["reward"] == 0.4


def test_correctness_reward_falls_back_to_the_first_logged_reward(tmp_path):
    folder = write_run(tmp_path / "bare", [{"step": 1, "rewards/exact/mean": 1.0, "rewards/fmt/mean": 0.0}])
    run = load_run(folder)
    assert run.correctness_reward == "exact" and run.series(TRAIN_ACCURACY) == [(1, 1.0)]
    assert run.estimator is None and run.plugins == []


# -- missing metrics -------------------------------------------------------------------------


def test_metrics_a_run_lacks_are_skipped_and_noted(runs, tmp_path):
    out = tmp_path / "out"
    assert compare_cli(*map(str, runs), "--output", str(out), "--no-plots") == 0
    table = table_rows(out)
    assert table["rloo-run"]["kl ↓"] == "-"
    assert table["rloo-run"]["completions/mean_length_correct ↕"] == "-"
    assert table["rloo-run"]["held-out acc. after"] == "-"
    notes = read_result(out)["notes"]
    assert "kl: not logged by rloo-run (TRL logs kl only when trainer.beta > 0); skipped for that run" in notes
    assert any(n.startswith("completions/mean_length_wrong: not logged by rloo-run") for n in notes)
    assert any(n.startswith("penalties/kimi-length/mean: not logged by grpo-run") for n in notes)
    assert "rloo-run: no summary.json (unfinished run?): no held-out accuracy" in notes
    text = (out / "compare.md").read_text(encoding="utf-8")
    assert "## Skipped metrics" in text and "- kl: not logged by rloo-run" in text


def test_a_metric_no_run_logged_has_no_column(runs, tmp_path):
    out = tmp_path / "out"
    assert compare_cli(str(runs[1]), "--output", str(out), "--no-plots") == 0
    assert "kl ↓" not in table_rows(out)["rloo-run"]
    result = read_result(out)
    assert "kl: no run logged it (TRL logs kl only when trainer.beta > 0); skipped" in result["notes"]


def test_cispo_clip_ratio_is_shown_only_when_a_run_logged_it(runs, tmp_path):
    cispo = write_run(
        tmp_path / "cispo-run", rows_from_columns([1, 2], {"reward": [0.1, 0.2], "cispo_clip_ratio": [0.3, 0.1]})
    )
    out = tmp_path / "out"
    assert compare_cli(str(runs[0]), str(cispo), "--output", str(out), "--no-plots") == 0
    table = table_rows(out)
    assert table["cispo-run"]["cispo_clip_ratio ↓"] == "0.1 / 0.1" and table["grpo-run"]["cispo_clip_ratio ↓"] == "-"
    notes = read_result(out)["notes"]
    assert (
        "clip_ratio/high_mean: not logged by cispo-run (TRL logs clip ratios for the grpo, bnpo, dr_grpo, "
        "dapo and luspo losses only); skipped for that run"
    ) in notes
    assert (
        "cispo_clip_ratio: not logged by grpo-run (TRL logs it for the cispo loss only); skipped for that run" in notes
    )
    assert not any(n.startswith("cispo_clip_ratio") for n in read_result_of(runs[0], tmp_path / "alone")["notes"])


# -- outputs ---------------------------------------------------------------------------------


def test_pngs_are_written_non_empty_and_listed(runs, tmp_path, capsys):
    out = tmp_path / "out"
    assert compare_cli(*map(str, runs), "--label", "GRPO", "--label", "RLOO", "--output", str(out)) == 0
    expected = ["rewards.png", "accuracy.png", "length.png", "kl.png", "entropy.png", "clip_ratio.png"]
    assert read_result(out)["plots"] == expected
    text = (out / "compare.md").read_text(encoding="utf-8")
    for name in expected:
        data = (out / name).read_bytes()
        assert data.startswith(PNG_MAGIC) and len(data) > 5000, name
        assert f"]({name})" in text
    assert set(table_rows(out)) == {"GRPO", "RLOO"}
    printed = capsys.readouterr().out
    assert "| GRPO | grpo |" in printed and f"6 plot(s) to {out}" in printed


def test_matplotlib_missing_names_the_extra(runs, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    assert compare_cli(str(runs[0]), "--output", str(tmp_path / "out")) == 2
    assert "pip install rlvr-plugins[plots]" in capsys.readouterr().err
    assert compare_cli(str(runs[0]), "--output", str(tmp_path / "out"), "--no-plots") == 0


def test_no_plots_writes_the_table_alone_and_a_rerun_drops_stale_pngs(runs, tmp_path):
    out = tmp_path / "out"
    assert compare_cli(*map(str, runs), "--output", str(out), "--no-plots") == 0
    assert not list(out.glob("*.png")) and read_result(out)["plots"] == []
    assert "- (not drawn: --no-plots)" in (out / "compare.md").read_text(encoding="utf-8")
    (out / "kl.png").write_bytes(PNG_MAGIC)
    assert compare_cli(str(runs[1]), "--output", str(out)) == 0
    assert not (out / "kl.png").exists() and (out / "entropy.png").exists()


# -- bad input -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "case, message",
    [
        ("missing", "not a folder"),
        ("no-metrics", "is not a run folder: it has no metrics.jsonl"),
        ("started", "the run has not logged a step yet"),
        ("empty", "is empty"),
        ("corrupt", ":2: malformed JSON"),
        ("no-step", ":1: the row has no integer 'step'"),
        ("no-numbers", "metrics.jsonl has no numeric metric in any row"),
        ("bad-summary", "summary.json: not valid JSON"),
        ("binary-summary", "summary.json: not valid UTF-8 (byte 1); the file is corrupt"),
        ("alias-config", "config.yaml:2: not valid YAML: YAML aliases (*a) are not allowed"),
    ],
)
def test_bad_folders_exit_2_naming_the_folder(runs, tmp_path, capsys, case, message):
    folder = tmp_path / case
    if case != "missing":
        folder.mkdir()
    if case == "started":
        (folder / "config.yaml").write_text("seed: 0\n")
    contents = {
        "empty": "",
        "corrupt": '{"step": 1, "reward": 0.5}\n{"step": 2, "reward": \n',
        "no-step": '{"reward": 0.5}\n',
        "no-numbers": '{"step": 1, "note": "x"}\n',
        "bad-summary": '{"step": 1, "reward": 0.5}\n',
        "binary-summary": '{"step": 1, "reward": 0.5}\n',
        "alias-config": '{"step": 1, "reward": 0.5}\n',
    }
    if case in contents:
        (folder / "metrics.jsonl").write_text(contents[case])
    if case == "bad-summary":
        (folder / "summary.json").write_text("{not json")
    if case == "binary-summary":
        (folder / "summary.json").write_bytes(b"{\xff}")
    if case == "alias-config":
        (folder / "config.yaml").write_text("a: &a [1]\nb: *a\n")
    assert compare_cli(str(runs[0]), str(folder), "--output", str(tmp_path / "out")) == 2
    err = capsys.readouterr().err
    assert str(folder) in err and message in err, err
    assert not (tmp_path / "out" / "compare.md").exists()


def test_label_count_must_match_the_runs(runs, tmp_path, capsys):
    assert compare_cli(*map(str, runs), "--label", "only-one", "--output", str(tmp_path / "out")) == 2
    assert "--label given 1 time(s) for 2 run folder(s)" in capsys.readouterr().err


def test_two_runs_with_one_label_are_refused(runs, tmp_path, capsys):
    other = write_run(tmp_path / "elsewhere" / "grpo-run", GRPO_ROWS)
    assert compare_cli(str(runs[0]), str(other), "--output", str(tmp_path / "out")) == 2
    err = capsys.readouterr().err
    assert "two runs have the label 'grpo-run'" in err and str(other) in err and "--label" in err


def test_an_output_that_is_a_file_is_refused(runs, tmp_path, capsys):
    (tmp_path / "taken").write_text("")
    assert compare_cli(str(runs[0]), "--output", str(tmp_path / "taken"), "--no-plots") == 2
    assert f"--output {tmp_path / 'taken'}: cannot create the folder" in capsys.readouterr().err


def test_smooth_must_be_positive(runs, capsys):
    with pytest.raises(SystemExit) as exc:
        compare_cli(str(runs[0]), "--smooth", "0")
    assert exc.value.code == 2 and "--smooth takes a whole number of steps >= 1" in capsys.readouterr().err


# -- a real run ------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_real_smoke_run_folder(tmp_path):
    """The smoke config trains 2 GRPO steps (about 20 s on a busy CPU, so marked slow), measuring held-out
    accuracy every step: eval rows at step 0 (before GRPO), 1 (during) and 2 (after), and a curves.png."""
    run_dir, out = tmp_path / "smoke", tmp_path / "out"
    env = {**os.environ, "RLVR_THREADS": "1", "PYTHONWARNINGS": "ignore"}
    trained = subprocess.run(
        [
            sys.executable,
            "-m",
            "rlvr_plugins.cli",
            "train",
            str(SMOKE),
            "--set",
            f"output_dir={run_dir}",
            "--set",
            "trainer.save_steps=100",
            "--set",
            "eval.every_steps=1",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert trained.returncode == 0, trained.stderr[-3000:]
    assert "[eval step 1] accuracy " in trained.stdout
    # 2 steps x 8 completions in training, 3 held-out evaluations x 16 problems (the start-up probe of
    # each reward's own example is not counted)
    assert "reward failures (no score, masked): r1-accuracy 0 of 64 items, r1-format 0 of 64 items" in trained.stdout
    summary = json.loads((run_dir / "summary.json").read_text())
    evals = [r for r in map(json.loads, (run_dir / "metrics.jsonl").read_text().splitlines()) if "eval/accuracy" in r]
    assert [r["step"] for r in evals] == [0, 1, 2]
    assert evals[0]["eval/accuracy"] == summary["eval_before"]["accuracy"]
    assert evals[2]["eval/accuracy"] == summary["eval_after"]["accuracy"]
    assert set(evals[1]) == {
        "step",
        "eval/accuracy",
        "eval/rewards/r1-accuracy",
        "eval/rewards/r1-format",
        "eval/no_score",
    }
    assert_drawn(run_dir / "curves.png")
    assert compare_cli(str(run_dir), "--output", str(out), "--metric", "eval/*") == 0
    result = read_result(out)
    [run] = result["runs"]
    assert (run["estimator"], run["plugins"], run["last_step"]) == ("grpo", ["r1-accuracy", "r1-format"], 2)
    assert run["correctness_reward"] == "r1-accuracy"
    assert run["eval_accuracy"] == {
        "before": summary["eval_before"]["accuracy"],
        "after": summary["eval_after"]["accuracy"],
    }
    logged = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    rewards = [r["reward"] for r in logged if "reward" in r]
    assert run["metrics"]["reward"]["final"] == rewards[-1] and run["metrics"]["reward"]["best"] == max(rewards)
    for name in (
        "reward",
        "rewards/r1-accuracy/mean",
        "rewards/r1-format/mean",
        "completions/mean_length",
        "entropy",
        "clip_ratio/region_mean",
    ):
        assert name in run["metrics"], name
    for name in ("rewards.png", "accuracy.png", "length.png", "entropy.png", "clip_ratio.png"):
        assert (out / name).read_bytes().startswith(PNG_MAGIC), name
    assert "| smoke | grpo | r1-accuracy, r1-format | 2 |" in (out / "compare.md").read_text(encoding="utf-8")
    assert_drawn(out / "metric-eval.png")
    assert run["metrics"]["eval/accuracy"]["final_step"] == 2


def assert_drawn(path: Path) -> None:
    """A valid PNG with a drawing on it (many distinct colours, not a blank canvas)."""
    from matplotlib.image import imread

    assert path.read_bytes().startswith(PNG_MAGIC), path
    pixels = imread(path)
    assert pixels.shape[0] > 200 and pixels.shape[1] > 300
    assert len({tuple(p) for p in pixels.reshape(-1, pixels.shape[-1])[::7].tolist()}) > 50


def test_importance_ratio_is_plotted_when_a_run_logged_it(runs, tmp_path):
    off = write_run(
        tmp_path / "off-policy",
        rows_from_columns(
            [1, 2, 3],
            {
                "reward": [0.1, 0.2, 0.3],
                "rlvr/ratio/abs_log_mean": [0.0, 0.02, 0.05],
                "rlvr/ratio/max": [1.0, 1.3, 2.5],
                "rlvr/ratio/min": [1.0, 0.8, 0.4],
            },
        ),
    )
    out = tmp_path / "out"
    assert compare_cli(str(runs[0]), str(off), "--output", str(out)) == 0
    assert "ratio.png" in read_result(out)["plots"] and (out / "ratio.png").read_bytes().startswith(PNG_MAGIC)
    table = table_rows(out)
    assert table["off-policy"]["rlvr/ratio/abs_log_mean ↕"] == "0.05 / 0–0.05"
    assert table["grpo-run"]["rlvr/ratio/max ↕"] == "-"


# -- issue 21, item 10: a full disk under --output -------------------------------------------------------------


def no_space(*args, **kwargs):
    import errno

    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_a_full_disk_under_output_is_one_line_and_leaves_no_partial_plot(runs, tmp_path, capsys, monkeypatch):
    from matplotlib.figure import Figure

    monkeypatch.setattr(Figure, "savefig", no_space)
    out = tmp_path / "cmp"
    assert compare_cli(str(runs[0]), str(runs[1]), "--output", str(out)) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") == 1
    assert err.startswith(f"rlvr: error: plot '{out}{os.sep}") and err.endswith(
        ".png' could not be written: no space left on the device; nothing was written there\n"
    )
    assert list(out.iterdir()) == []
