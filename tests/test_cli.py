"""The ``rlvr`` command line: listing, config errors before any model loads, and end-to-end runs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from rlvr_plugins import cli
from rlvr_plugins.train.runlog import read_metrics

REPO = Path(__file__).resolve().parents[1]

SMOKE = REPO / "tests" / "configs" / "smoke.yaml"


def run_cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "rlvr_plugins.cli", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
        timeout=600,
    )


def write_config(tmp_path, **changes):
    config = yaml.safe_load(SMOKE.read_text())
    for key, value in changes.items():
        config[key] = value
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def test_plugins_json_lists_builtins_and_installed_plugins(capsys):
    assert cli.main(["plugins", "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert {"grpo", "rloo", "batch-std", "repeat-sampler", "plain-template"} <= set(rows)
    assert rows["r1-accuracy"]["distribution"] == "rlvr-r1"
    assert rows["r1-accuracy"]["hooks"] == ["rlvr_check_dataset", "rlvr_reward_functions", "rlvr_validate_run"]
    assert any(o.startswith("weight (float") for o in rows["r1-accuracy"]["options"])


def test_plugins_with_config_marks_enabled(capsys):
    assert cli.main(["plugins", "--json", "--config", str(SMOKE)]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["r1-format"]["enabled"] and not rows["rloo"]["enabled"]


def test_invalid_config_lists_every_problem_and_loads_nothing(tmp_path, capsys):
    path = write_config(
        tmp_path,
        trainer={"learning_rat": 1e-5, "max_steps": 1},
        sedd=3,
        model={"tiny": {}, "name_or_path": "x", "dtype": "float8"},
    )
    assert cli.main(["train", str(path)]) == 2
    err = capsys.readouterr().err
    assert "unknown top-level key 'sedd'; did you mean seed?" in err
    assert "unknown trainer field 'learning_rat'; did you mean learning_rate" in err
    assert "model needs exactly one of name_or_path" in err
    assert "model.dtype must be one of" in err
    assert "(4 problem(s))" in err
    assert not (tmp_path / "run").exists()


def test_unknown_plugin_exits_nonzero_listing_installed(tmp_path):
    path = write_config(tmp_path, plugins={"r1-acuracy": {}})
    result = run_cli("train", str(path))
    assert result.returncode == 2
    assert "not installed: 'r1-acuracy'" in result.stderr and "r1-accuracy" in result.stderr
    assert "Traceback" not in result.stderr


def test_bad_plugin_option_and_override(tmp_path, capsys):
    assert cli.main(["train", str(SMOKE), "--set", "plugins.r1-format.wieght=2"]) == 2
    err = capsys.readouterr().err
    assert "plugin 'r1-format': unknown option 'wieght' (did you mean 'weight'?)" in err
    assert cli.main(["train", str(SMOKE), "--set", "trainer.max_steps=3", "--check"]) == 0
    assert "config OK; plugins: r1-accuracy, r1-format, grpo" in capsys.readouterr().out


def test_disable_turns_a_plugin_off_from_the_command_line(capsys):
    assert cli.main(["train", str(SMOKE), "--check", "--disable", "r1-format", "--set", "plugins.rloo={}"]) == 0
    assert capsys.readouterr().out == "config OK; plugins: r1-accuracy, rloo, repeat-sampler, plain-template\n"
    assert cli.main(["train", str(SMOKE), "--check", "--set", "plugins.r1-format=null"]) == 0
    assert capsys.readouterr().out == "config OK; plugins: r1-accuracy, grpo, repeat-sampler, plain-template\n"
    assert cli.main(["train", str(SMOKE), "--check", "--disable", "r1-fromat"]) == 2
    err = capsys.readouterr().err
    assert (
        "override 'plugins.r1-fromat=': plugin 'r1-fromat' is not enabled, so it cannot be disabled; "
        "did you mean r1-format?\n"
    ) in err and "Traceback" not in err
    assert cli.main(["train", str(SMOKE), "--check", "--disable", "zzz"]) == 2
    assert (
        "plugin 'zzz' is not enabled, so it cannot be disabled; enabled: r1-accuracy, r1-format\n"
        in capsys.readouterr().err
    )


def test_an_empty_override_removes_the_key():
    from rlvr_plugins.train.config import apply_overrides

    config = {"model": {"tiny": {"hidden_size": 8}, "tokenizer": "char"}, "engine": {"memory_limit_mb": 64}}
    out = apply_overrides(config, ["model.tiny=", "model.name_or_path=runs/x/final", "engine.memory_limit_mb=null"])
    assert out == {"model": {"tokenizer": "char", "name_or_path": "runs/x/final"}, "engine": {"memory_limit_mb": None}}
    assert config["model"]["tiny"] == {"hidden_size": 8}


def test_grpo_config_rejection_is_reported_as_config_error(tmp_path, capsys):
    assert cli.main(["train", str(SMOKE), "--check", "--set", "trainer.num_generations=3"]) == 2
    assert "trainer:" in capsys.readouterr().err


def test_missing_config_file(capsys):
    assert cli.main(["train", "no/such/file.yaml"]) == 2
    assert "config file 'no/such/file.yaml' does not exist" in capsys.readouterr().err


@pytest.mark.slow
def test_smoke_run_writes_a_complete_run_folder(tmp_path):
    out = tmp_path / "run"
    result = run_cli("train", str(SMOKE), "--set", f"output_dir={out}", "--set", "sft.logging_steps=1")
    assert result.returncode == 0, result.stderr[-3000:]
    for name in ("config.yaml", "plugins.json", "metrics.jsonl", "summary.json", "checkpoint-2", "final"):
        assert (out / name).exists(), name
    plugins = json.loads((out / "plugins.json").read_text())
    assert [p["name"] for p in plugins["plugins"]] == [
        "r1-accuracy",
        "r1-format",
        "grpo",
        "repeat-sampler",
        "plain-template",
    ]
    assert plugins["plugins"][1]["options"]["weight"] == 0.5
    assert plugins["versions"]["trl"].startswith("1.16")
    rows = [r for r in read_metrics(out / "metrics.jsonl") if "reward" in r]
    assert [r["step"] for r in rows] == [1, 2]
    for r in rows:
        assert 0 <= r["rewards/r1-accuracy/mean"] <= 1 and 0 <= r["rewards/r1-format/mean"] <= 1
        assert "rlvr/frac_zero_variance_groups" in r
    summary = json.loads((out / "summary.json").read_text())
    assert summary["grpo_steps"] == 2 and summary["sft_examples"] == 32
    # the SFT's second (last) step logged its loss: 2 steps of 16 from a random init, so well above 0
    assert isinstance(summary["sft_final_loss"], float) and 0.5 < summary["sft_final_loss"] < 20
    assert summary["eval_before"]["n"] == 16 and summary["eval_after"]["reward"] == "r1-accuracy"
    assert "held-out accuracy" in result.stdout
    resolved = yaml.safe_load((out / "config.yaml").read_text())
    assert resolved["output_dir"] == str(out)
    readme = (out / "README.md").read_text()  # ours, not TRL's model card of a base model "[None]"
    assert readme.startswith(f"# {out}: an rlvr-plugins run\n") and "[None]" not in readme
    assert "with the plugins r1-accuracy, r1-format, grpo, repeat-sampler, plain-template,\n" in readme


@pytest.mark.slow
def test_third_party_plugin_from_the_docs_is_installed_and_called(tmp_path):
    target = tmp_path / "site"
    pip = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "--target",
            str(target),
            str(REPO / "docs" / "example-plugin"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert pip.returncode == 0, pip.stderr
    config = yaml.safe_load(SMOKE.read_text())
    config["plugins"]["no-repeat"] = {"n": 3, "weight": 0.5}
    config.pop("sft")
    config.pop("eval")
    config["output_dir"] = str(tmp_path / "run")
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(target), os.environ.get("PYTHONPATH", "")])}
    listed = subprocess.run(
        [sys.executable, "-m", "rlvr_plugins.cli", "plugins", "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert "rlvr-no-repeat" in listed.stdout
    result = subprocess.run(
        [sys.executable, "-m", "rlvr_plugins.cli", "train", str(path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    rows = [r for r in read_metrics(tmp_path / "run" / "metrics.jsonl") if "reward" in r]
    values = [r["rewards/no-repeat/mean"] for r in rows]
    assert len(values) == 2 and all(-1 <= v <= 0 for v in values)
    assert any(v < 0 for v in values)  # an untrained tiny model repeats itself
    weights = json.loads((tmp_path / "run" / "plugins.json").read_text())["rewards"]
    assert {"plugin": "no-repeat", "name": "no-repeat", "weight": 0.5, "isolated": True} in weights


def fake_run_folder(tmp_path, config_text: str, final: bool = True):
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "config.yaml").write_text(config_text)
    if final:
        (folder / "final").mkdir()
    return folder


def test_a_run_folder_is_read_as_its_config_with_its_final_model(tmp_path):
    from rlvr_plugins.train.config import load_config_or_run, run_config_text

    config = {**yaml.safe_load(SMOKE.read_text()), "_config_dir": "/somewhere/configs"}
    text = run_config_text(config)
    assert text.startswith("# relative paths of this config are relative to: /somewhere/configs\noutput_dir: ")
    folder = fake_run_folder(tmp_path, text)
    loaded = load_config_or_run(folder, ["eval.n=2"])
    assert loaded["model"] == {"name_or_path": str((folder / "final").resolve())}
    assert loaded["output_dir"] == str(folder) and loaded["_config_dir"] == "/somewhere/configs"
    assert loaded["eval"]["n"] == 2 and loaded["plugins"] == config["plugins"]


@pytest.mark.parametrize(
    "has_config, has_final, message",
    [
        (False, True, "is a folder but not a run folder: it has no config.yaml"),
        (True, False, "the run has no final/ model (unfinished?)"),
    ],
)
def test_a_folder_that_is_not_a_finished_run_is_refused(tmp_path, capsys, has_config, has_final, message):
    folder = fake_run_folder(tmp_path, SMOKE.read_text(), final=has_final)
    if not has_config:
        (folder / "config.yaml").unlink()
    assert cli.main(["eval", str(folder)]) == 2
    err = capsys.readouterr().err
    assert message in err and str(folder) in err and "Traceback" not in err


@pytest.mark.slow
def test_eval_and_score_a_run_folder(tmp_path):
    """rlvr eval RUN_DIR / rlvr score RUN_DIR use the run's own config and its final/ model (~30 s)."""
    run = tmp_path / "run"
    trained = run_cli("train", str(SMOKE), "--set", f"output_dir={run}", "--set", "trainer.save_steps=100")
    assert trained.returncode == 0, trained.stderr[-2000:]
    evaluated = run_cli("eval", str(run))
    assert evaluated.returncode == 0, evaluated.stderr[-2000:]
    assert yaml.safe_load((run / "eval_config.yaml").read_text())["model"] == {"name_or_path": str(run / "final")}
    assert json.loads((run / "eval.json").read_text())["metrics"]["problems"] == 16
    rows = tmp_path / "rows.jsonl"
    rows.write_text(
        json.dumps({"prompt": "3+4=", "completion": "<think>7</think><answer>7</answer>", "answer": "7"}) + "\n"
    )
    scored = run_cli("score", str(run), str(rows), "--output", str(tmp_path / "scored.jsonl"))
    assert scored.returncode == 0, scored.stderr[-2000:]
    [row] = [json.loads(line) for line in (tmp_path / "scored.jsonl").read_text().splitlines()]
    assert row["r1-accuracy"] == 1.0 and row["r1-format"] == 1.0


@pytest.mark.parametrize("command", ["eval", "sft", "filter", "distill"])
def test_command_help_describes_it_and_shows_examples_that_validate(command, capsys):
    import shlex

    from rlvr_plugins.train.config import load_config

    module = __import__(f"rlvr_plugins.cli.{command}_cmd", fromlist=["EXAMPLES"])
    with pytest.raises(SystemExit) as exc:
        cli.main([command, "--help"])
    out = capsys.readouterr().out
    assert exc.value.code == 0
    assert module.__doc__.splitlines()[0] in out and module.EXAMPLES.strip() in out
    examples = [shlex.split(line.split("#")[0]) for line in module.EXAMPLES.splitlines()[1:] if line.strip()]
    assert examples and all(words[:2] == ["rlvr", command] for words in examples)
    for words in examples:
        target = REPO / words[2]
        if words[2].startswith("runs/"):
            continue  # a run folder of `make demo`
        overrides = [w for w in words[3:] if w != "--set"]
        load_config(target, overrides, need_model=command != "filter")


def raises_on_anything(*, prompt, completion, example):
    raise KeyError("solution")


def first_char_is_digit(*, prompt, completion, example):
    return float(completion[:1].isdigit())


def test_check_refuses_a_reward_that_fails_on_its_own_example(reward_plugin, rlvr_cli):
    example = {"prompt": "1+1=", "completion": "2", "example": {"answer": "2"}}
    reward_plugin("broken", raises_on_anything, isolated=False, example=example)
    reward_plugin("fine", first_char_is_digit, isolated=False, example=example)
    assert rlvr_cli("train", SMOKE, "--check", "--set", "plugins.fine={}").exit_code == 0
    result = rlvr_cli("train", SMOKE, "--check", "--set", "plugins.broken={}")
    assert result.exit_code == 2
    err = result.err
    assert (
        "rlvr: error: reward 'broken' (plugin 'broken') fails on its own example: KeyError: 'solution'. It would "
        "fail on every row: fix the plugin or disable it (--disable NAME)\n"
    ) in err


def test_a_reward_example_must_be_an_item():
    from rlvr_plugins import RewardFunction

    with pytest.raises(TypeError, match="RewardFunction 'r': example must be a mapping with 'prompt', 'completion'"):
        RewardFunction("r", first_char_is_digit, example={"completion": "2"})


@pytest.mark.parametrize("value", ["0", "-3", "2.5", "true", "'ten'"])
def test_eval_every_steps_must_be_a_whole_number_of_steps(capsys, value):
    assert cli.main(["train", str(SMOKE), "--check", "--set", f"eval.every_steps={value}"]) == 2
    err = capsys.readouterr().err
    assert "eval.every_steps must be a whole number of steps >= 1 (or absent), got " in err and "Traceback" not in err


def test_the_example_probe_is_not_counted_in_the_runs_reward_failures():
    from rlvr_plugins import RewardFunction
    from rlvr_plugins.rewards import Engines, probe_rewards

    example = {"prompt": "1+1=", "completion": "2", "example": {"answer": "2"}}
    reward = RewardFunction("r", first_char_is_digit, isolated=False, example=example)
    engines = Engines(in_process=True)
    probe_rewards([("p", reward)], engines)
    assert engines.failures() == {}
    engines.score(reward, [dict(example), {**example, "completion": "x"}])
    assert engines.failures() == {"r": {"items": 2, "failed": 0}}


def test_the_summary_says_after_sft_only_for_a_run_that_had_one(capsys):
    from rlvr_plugins.train.run import _print_summary

    summary = {"output_dir": "runs/x", "seconds": 3.0, "stages": {}, "eval_before": {"accuracy": 0.25, "n": 8}}
    _print_summary(summary)
    lines = capsys.readouterr().out.splitlines()
    assert "held-out accuracy              before GRPO:  25.0%  (n=8)" in lines
    _print_summary({**summary, "sft_examples": 32})
    assert "held-out accuracy  after SFT (before GRPO):  25.0%  (n=8)" in capsys.readouterr().out.splitlines()


def test_a_signal_during_a_stage_without_checkpoints_ends_with_one_line_of_ours(monkeypatch, capsys):
    """SIGTERM during the SFT cold start (no checkpoint to write, unlike GRPO's graceful stop): one line naming
    the signal, the stage, how far it got and what to do; exit status 128 + 15, as a process killed by it."""
    import signal

    from rlvr_plugins.cli import app
    from rlvr_plugins.train.runlog import interrupted_by_signal

    def sft_killed(args):
        with interrupted_by_signal("the SFT cold start", lambda: "step 3 of 700", "run it again"):
            os.kill(os.getpid(), signal.SIGTERM)
            raise AssertionError("the signal did not stop the stage")

    before = signal.getsignal(signal.SIGTERM)
    monkeypatch.setattr(app, "cmd_train", sft_killed)
    assert cli.main(["train", str(SMOKE)]) == 143
    assert capsys.readouterr().err == (
        "rlvr: stopped by SIGTERM during the SFT cold start (step 3 of 700); run it again\n"
    )
    assert signal.getsignal(signal.SIGTERM) is before


@pytest.mark.slow
def test_sigterm_during_the_sft_cold_start_of_rlvr_train_ends_with_our_line(tmp_path):
    argv = [sys.executable, "-m", "rlvr_plugins.cli", "train", str(SMOKE), "--set", f"output_dir={tmp_path / 'run'}"]
    argv += ["--set", "sft.max_steps=100000", "--set", "sft.logging_steps=1", "--set", "sft.disable_tqdm=true"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO)
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("[sft] step "):
            break
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err[-2000:]
    last = err.strip().splitlines()[-1]
    assert last.startswith("rlvr: stopped by SIGTERM during the SFT cold start (step ")
    assert last.endswith(
        "of 100000); SFT keeps no checkpoint, so nothing of it was saved: run the command again "
        "(rlvr train: with --overwrite)"
    )


def test_setting_an_option_of_a_plugin_the_config_does_not_enable_is_an_error_naming_it(capsys):
    """``--set plugins.X.opt=...`` used to enable X silently; now it names X and how to enable it."""
    assert cli.main(["train", str(SMOKE), "--check", "--set", "plugins.kimi-length.weight=0.5"]) == 2
    assert capsys.readouterr().err == (
        "rlvr: error: invalid config in --set: override 'plugins.kimi-length.weight=0.5': plugin 'kimi-length' is "
        "not enabled, so it has no option to set; enable it with --set 'plugins.kimi-length={weight: ...}' (or "
        "under plugins: in the config); enabled: r1-accuracy, r1-format\n"
    )
    assert cli.main(["train", str(SMOKE), "--check", "--set", "plugins.r1-formt.weight=1"]) == 2
    assert "plugin 'r1-formt' is not enabled (did you mean r1-format?)" in capsys.readouterr().err


def test_an_option_of_a_plugin_enabled_by_an_earlier_override_can_be_set(capsys, tmp_path):
    argv = ["train", str(SMOKE), "--check", "--set", f"output_dir={tmp_path}", "--set", "plugins.rloo={}"]
    assert cli.main([*argv, "--set", "plugins.r1-format.weight=0.2"]) == 0
    from rlvr_plugins.train.config import load_config

    config = load_config(SMOKE, ["plugins.mean-baseline={}", "plugins.mean-baseline.x=1", "plugins.r1-format.weight=0"])
    assert config["plugins"] == {"r1-accuracy": {}, "r1-format": {"weight": 0}, "mean-baseline": {"x": 1}}
