"""The run folder: a used output_dir is refused (or --overwrite), resume checks its checkpoint, its path
and its config, a finished checkpoint trains nothing more, a kill while saving or a full disk never
loses the last complete checkpoint, and an unusable output_dir is a one-line error.

The training runs are subprocesses on the tiny smoke model (one thread, a few steps).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import subprocess
import sys
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml

from rlvr_plugins import Plugin, cli, hookimpl
from rlvr_plugins.checkpoints import PLUGIN_STATE_FILE, last_complete_checkpoint, write_errno
from rlvr_plugins.manager import temporary_plugin
from rlvr_plugins.train.runfolder import (
    TRL_LR_SCHEDULER,
    RunStart,
    clear_run,
    config_differences,
    plan_run,
    run_entries,
    schedule_needs_max_steps,
)
from rlvr_plugins.train.runlog import read_metrics

REPO = Path(__file__).resolve().parents[1]
SMOKE = REPO / "tests" / "configs" / "smoke.yaml"
KILLING = REPO / "tests" / "killing_plugin.py"


def smoke_config(out: Path, eval_rows: int = 0, **trainer) -> dict:
    cfg = yaml.safe_load(SMOKE.read_text())
    cfg["output_dir"] = str(out)
    cfg["sft"] = None
    if eval_rows:
        cfg["data"]["eval"]["size"] = eval_rows
    else:
        cfg.pop("eval")
        cfg["data"].pop("eval")
    cfg["trainer"].update(trainer)
    return cfg


def write_config(tmp_path: Path, cfg: dict, name: str = "run.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(cfg))
    return path


def rlvr(*args: str, script: Path | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    command = [sys.executable, str(script)] if script else [sys.executable, "-m", "rlvr_plugins.cli"]
    return subprocess.run(
        [*command, *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONWARNINGS": "ignore", "RLVR_THREADS": "1", **(env or {})},
    )


def beside(*args: str, **kw) -> Future[subprocess.CompletedProcess]:
    """:func:`rlvr` in a thread, beside the test's own runs: a reference run that shares nothing with them uses the
    core those leave idle (each run is one torch thread)."""
    pool = ThreadPoolExecutor(1)
    future = pool.submit(rlvr, *args, **kw)
    pool.shutdown(wait=False)  # the thread ends with the run; the test waits on the future
    return future


def steps(out: Path) -> list[int]:
    return [r["step"] for r in read_metrics(out / "metrics.jsonl") if "loss" in r]


def fake_checkpoint(run: Path, step: int, max_steps: int = 4, complete: bool = True) -> Path:
    folder = run / f"checkpoint-{step}"
    folder.mkdir(parents=True)
    (folder / "trainer_state.json").write_text(json.dumps({"global_step": step, "max_steps": max_steps}))
    if complete:
        (folder / PLUGIN_STATE_FILE).write_text("{}")
    return folder


def fake_run(run: Path, cfg: dict, checkpoints=(1, 2)) -> None:
    """A run folder as rlvr train leaves it (the files that matter here)."""
    run.mkdir(parents=True, exist_ok=True)
    (run / "config.yaml").write_text(yaml.safe_dump(cfg))
    (run / "plugins.json").write_text("{}")
    (run / "metrics.jsonl").write_text("".join(json.dumps({"step": s, "loss": 0.0}) + "\n" for s in checkpoints))
    for step in checkpoints:
        fake_checkpoint(run, step)


def error_of(capsys, *argv: str) -> str:
    assert cli.main(list(argv)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err  # one line
    return err.removeprefix("rlvr: error: ").rstrip("\n")


# -- 11: a fresh run into a used folder; --overwrite --------------------------------------------------
def test_fresh_run_into_a_folder_holding_a_run_is_refused(tmp_path, capsys):
    out = tmp_path / "run"
    cfg = smoke_config(out)
    fake_run(out, cfg)
    assert error_of(capsys, "train", str(write_config(tmp_path, cfg))) == (
        f"output_dir {out} already holds a run (checkpoint-1, checkpoint-2, config.yaml, metrics.jsonl, "
        "plugins.json): continue it with --resume, start it over with --overwrite (removes those entries), or "
        "choose another output_dir"
    )
    assert steps(out) == [1, 2] and sorted(os.listdir(out)) == [
        "checkpoint-1",
        "checkpoint-2",
        "config.yaml",
        "metrics.jsonl",
        "plugins.json",
    ]


def test_a_tilde_in_output_dir_is_the_home_folder_as_for_transformers(tmp_path, monkeypatch):
    """transformers expands ~ in output_dir (its checkpoints go there): the run folder checks look at the same place."""
    from rlvr_plugins.errors import RunFolderError
    from rlvr_plugins.train.runfolder import output_dir

    monkeypatch.setenv("HOME", str(tmp_path))
    cfg = smoke_config(Path("~/run"))
    fake_run(tmp_path / "run", cfg)
    with pytest.raises(RunFolderError, match=f"output_dir {tmp_path}/run already holds a run"):
        plan_run(cfg)
    assert plan_run(cfg, resume=True).checkpoint == tmp_path / "run" / "checkpoint-2"
    assert output_dir(cfg) == tmp_path / "run"  # what GRPOConfig gets too (run.grpo_kwargs)


def test_check_notes_a_used_folder_and_checks_the_resume(tmp_path, capsys):
    out = tmp_path / "run"
    cfg = smoke_config(out)
    fake_run(out, cfg)
    path = str(write_config(tmp_path, cfg))
    assert cli.main(["train", path, "--check"]) == 0
    assert capsys.readouterr().out.splitlines()[1] == (
        f"note: output_dir {out} holds a run: training it needs --resume or --overwrite"
    )
    assert cli.main(["train", path, "--check", "--resume"]) == 0
    assert "note:" not in capsys.readouterr().out
    assert error_of(capsys, "train", path, "--check", "--resume", str(out / "checkpoint-1")).startswith(
        f"--resume {out}/checkpoint-1: {out} holds newer complete checkpoints (checkpoint-2)"
    )


def test_a_folder_of_other_files_is_not_a_run(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    assert plan_run({"output_dir": str(tmp_path)}) == RunStart(tmp_path)
    (tmp_path / "config.yaml").write_text("mine too")  # the user's, alone: not a run
    assert run_entries(tmp_path) == []


def test_a_config_or_readme_of_the_users_is_never_overwritten_by_a_run(tmp_path, capsys):
    out = tmp_path / "run"
    out.mkdir()
    (out / "config.yaml").write_text("# my notes\nseed: 1\n")
    (out / "README.md").write_text("mine")
    cfg = str(write_config(tmp_path, smoke_config(out)))
    refused = (
        f"output_dir {out} holds README.md, config.yaml of your own (no run beside it), which the run would "
        "overwrite with its resolved config and TRL's model card; move it, or choose another output_dir"
    )
    assert error_of(capsys, "train", cfg) == refused
    assert error_of(capsys, "train", cfg, "--check") == refused
    assert error_of(capsys, "train", cfg, "--overwrite") == refused
    other = tmp_path / "other"
    fake_run(other, smoke_config(other))
    assert error_of(capsys, "train", cfg, "--resume", str(other / "checkpoint-2")) == refused
    assert (out / "config.yaml").read_text() == "# my notes\nseed: 1\n" and (out / "README.md").read_text() == "mine"
    assert sorted(os.listdir(out)) == ["README.md", "config.yaml"]


def test_clear_run_removes_only_the_runs_entries(tmp_path):
    fake_run(tmp_path, {"seed": 0}, checkpoints=(3,))
    for name in ("final", "policy-init", "sft"):
        (tmp_path / name).mkdir()
    (tmp_path / "summary.json").write_text("{}")
    (tmp_path / "notes.txt").write_text("mine")
    (tmp_path / "checkpoints-old").mkdir()  # not checkpoint-<step>
    assert clear_run(tmp_path) == [
        "checkpoint-3",
        "config.yaml",
        "final",
        "metrics.jsonl",
        "plugins.json",
        "policy-init",
        "sft",
        "summary.json",
    ]
    assert sorted(os.listdir(tmp_path)) == ["checkpoints-old", "notes.txt"]


def test_overwrite_and_resume_together_are_refused(tmp_path, capsys):
    cfg = smoke_config(tmp_path / "run")
    assert error_of(capsys, "train", str(write_config(tmp_path, cfg)), "--overwrite", "--resume") == (
        "--overwrite starts the run over from nothing; it cannot be combined with --resume"
    )


@pytest.mark.slow
def test_overwrite_replaces_the_earlier_run_and_keeps_other_files(tmp_path):
    out = tmp_path / "run"
    cfg = smoke_config(out)
    fake_run(out, {"seed": 1}, checkpoints=(1, 2, 7))
    (out / "notes.txt").write_text("mine")
    result = rlvr("train", str(write_config(tmp_path, cfg)), "--overwrite")
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"--overwrite: removed the earlier run from {out} (6 entries)" in result.stdout
    assert steps(out) == [1, 2]  # not 1, 2, 7, 1, 2
    assert last_complete_checkpoint(out) == str(out / "checkpoint-2") and not (out / "checkpoint-7").exists()
    assert yaml.safe_load((out / "config.yaml").read_text())["seed"] == 0
    assert (out / "notes.txt").read_text() == "mine"


# -- 11: resume refuses another config, another run's folder, a branch point -----------------------
def test_resume_refuses_a_checkpoint_of_another_config(tmp_path, capsys):
    out = tmp_path / "run"
    run_cfg = smoke_config(out)
    fake_run(out, run_cfg)
    cfg = smoke_config(out, learning_rate=0.002, save_steps=5, logging_steps=2)  # the last two may differ
    cfg["plugins"]["r1-format"]["weight"] = 1.0
    cfg["plugins"]["rloo"] = {}
    assert error_of(capsys, "train", str(write_config(tmp_path, cfg)), "--resume") == (
        f"--resume {out}/checkpoint-2: this config differs from the run's ({out}/config.yaml): "
        "plugins.r1-format.weight: 0.5 in the run, 1.0 now; plugins.rloo: (not set) in the run, {} now; "
        "trainer.learning_rate: 0.001 in the run, 0.002 now; resume with the run's config, or start a new run in "
        "another output_dir"
    )
    same = smoke_config(out, save_steps=5, logging_steps=2)
    assert plan_run(same, True) == RunStart(out, out / "checkpoint-2", 2)


def test_config_differences_are_dotted_keys_and_numbers_compare_by_value():
    a = {"trainer": {"learning_rate": 1e-3, "max_steps": 2, "beta": 0}, "plugins": {"x": {}}, "seed": 0}
    b = {"trainer": {"learning_rate": 1e-3, "max_steps": 3, "beta": 0.0}, "plugins": {"x": {}, "y": {}}, "seed": False}
    assert config_differences(a, b) == ["trainer.max_steps", "plugins.y", "seed"]
    assert config_differences(a, a) == []


def test_resume_into_a_folder_holding_another_run_is_refused(tmp_path, capsys):
    a, b = tmp_path / "a", tmp_path / "b"
    fake_run(a, smoke_config(a))
    fake_run(b, smoke_config(b))
    cfg = write_config(tmp_path, smoke_config(b))
    assert error_of(capsys, "train", str(cfg), "--resume", str(a / "checkpoint-2")) == (
        f"--resume {a}/checkpoint-2: output_dir {b} holds another run (checkpoint-1, checkpoint-2, config.yaml, "
        f"metrics.jsonl, plugins.json); resume into the checkpoint's own folder {a} or into an output_dir that "
        "holds no run"
    )
    fresh = tmp_path / "c"
    assert plan_run(smoke_config(fresh), str(a / "checkpoint-2")) == RunStart(fresh, a / "checkpoint-2", 2)


def test_resume_from_an_older_checkpoint_with_newer_ones_is_refused(tmp_path, capsys):
    out = tmp_path / "run"
    fake_run(out, smoke_config(out), checkpoints=(1, 2, 3))
    assert error_of(
        capsys, "train", str(write_config(tmp_path, smoke_config(out))), "--resume", str(out / "checkpoint-1")
    ) == (
        f"--resume {out}/checkpoint-1: {out} holds newer complete checkpoints (checkpoint-2, checkpoint-3) that the "
        "resumed run would mix with its own; resume from the newest (--resume alone), or move them away"
    )


def test_resume_skips_an_incomplete_newest_checkpoint_with_a_warning(tmp_path, caplog):
    out = tmp_path / "run"
    cfg = smoke_config(out)
    fake_run(out, cfg)
    fake_checkpoint(out, 3, complete=False)
    assert plan_run(cfg, True) == RunStart(out, out / "checkpoint-2", 2)
    assert caplog.messages == [
        f"{out}/checkpoint-3 is incomplete (interrupted while saving): resuming from {out}/checkpoint-2"
    ]


def test_a_second_run_into_a_folder_in_use_stops_at_once(tmp_path, capsys):
    out = tmp_path / "run"
    out.mkdir()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, os, sys, time; fd = os.open(sys.argv[1], "
            "os.O_RDONLY); fcntl.flock(fd, fcntl.LOCK_EX); print('locked', flush=True); "
            "time.sleep(60)",
            str(out),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline() == "locked\n"
        assert error_of(capsys, "train", str(write_config(tmp_path, smoke_config(out)))) == (
            f"output_dir {out} is in use by another rlvr train that is running now; wait for it to end, or choose "
            "another output_dir"
        )
    finally:
        holder.kill()
        holder.wait()
    assert os.listdir(out) == []


def test_a_run_that_saved_between_the_plan_and_the_lock_is_seen_under_the_lock(tmp_path):
    """rlvr train plans before importing torch (seconds) and locks after: a run that ended in between and
    left a newer checkpoint, or a run in the folder a resume was going into, stops this one."""
    from rlvr_plugins.errors import RunFolderError
    from rlvr_plugins.train.run import train

    out = tmp_path / "run"
    cfg = smoke_config(out)
    fake_run(out, cfg)
    start = plan_run(cfg, resume=True)
    assert start.checkpoint == out / "checkpoint-2"
    fake_checkpoint(out, 3)
    with pytest.raises(RunFolderError, match=r"holds newer complete checkpoints \(checkpoint-3\)"):
        train(cfg, start=start)
    into = smoke_config(tmp_path / "b")
    start = plan_run(into, resume=str(out / "checkpoint-3"))
    fake_run(tmp_path / "b", into, checkpoints=(1,))
    with pytest.raises(RunFolderError, match="holds another run"):
        train(into, start=start)
    assert sorted(os.listdir(out)) == [
        "checkpoint-1",
        "checkpoint-2",
        "checkpoint-3",
        "config.yaml",
        "metrics.jsonl",
        "plugins.json",
    ]


def test_resuming_into_another_folder_copies_policy_init_and_metrics_up_to_the_step(tmp_path):
    from rlvr_plugins.train.runfolder import continue_in

    a, b = tmp_path / "a", tmp_path / "b"
    fake_run(a, {"seed": 0}, checkpoints=(1, 2, 3))
    (a / "policy-init").mkdir()
    (a / "policy-init" / "model.safetensors").write_bytes(b"weights")
    b.mkdir()
    continue_in(b, RunStart(b, a / "checkpoint-2", 2))
    assert (b / "policy-init" / "model.safetensors").read_bytes() == b"weights"
    assert steps(b) == [1, 2] and steps(a) == [1, 2, 3]


def test_a_full_disk_while_resuming_into_another_folder_leaves_nothing_half_copied(tmp_path):
    """A half-copied policy-init/ would make the folder look like another run's: the next resume is refused."""
    from rlvr_plugins.train.runfolder import continue_in

    a = tmp_path / "a"
    fake_run(a, {"seed": 0}, checkpoints=(1, 2))
    (a / "policy-init").mkdir()
    (a / "policy-init" / "config.json").write_text("{}")
    (a / "policy-init" / "model.safetensors").write_bytes(b"w" * (2 << 20))
    with tmpfs(tmp_path / "small", "1m") as small:
        with pytest.raises(OSError) as raised:
            continue_in(small, RunStart(small, a / "checkpoint-2", 2))
        assert raised.value.errno == errno.ENOSPC or "No space left" in str(raised.value)
        assert os.listdir(small) == [] and run_entries(small) == []
    b = tmp_path / "b"
    (b / ".rlvr-resume-partial" / "policy-init").mkdir(parents=True)  # a kill mid-copy left it
    continue_in(b, RunStart(b, a / "checkpoint-2", 2))
    assert sorted(os.listdir(b)) == ["metrics.jsonl", "policy-init"] and steps(b) == [1, 2]
    assert (b / "policy-init" / "model.safetensors").read_bytes() == b"w" * (2 << 20)


# -- 23: --resume PATH errors name PATH ---------------------------------------------------------------
def test_resume_path_errors_name_the_path_given(tmp_path, capsys):
    out = tmp_path / "run"
    fake_run(out, smoke_config(out))
    cfg = str(write_config(tmp_path, smoke_config(out)))
    a_file = tmp_path / "weights.bin"
    a_file.write_text("x")
    partial = fake_checkpoint(tmp_path / "other", 5, complete=False)
    assert error_of(capsys, "train", cfg, "--resume", str(a_file)) == (
        f"--resume {a_file}: is a file; give a checkpoint folder (checkpoint-<step>)"
    )
    assert error_of(capsys, "train", cfg, "--resume", str(tmp_path / "nope")) == (
        f"--resume {tmp_path}/nope: no such folder"
    )
    assert error_of(capsys, "train", cfg, "--resume", str(partial)) == (
        f"--resume {partial}: not a complete checkpoint of rlvr train (no {PLUGIN_STATE_FILE}, its last file: the "
        "save was interrupted, or it is not a checkpoint)"
    )
    empty = tmp_path / "empty"
    assert error_of(capsys, "train", str(write_config(tmp_path, smoke_config(empty), "e.yaml")), "--resume") == (
        f"--resume: no complete checkpoint in {empty}; start the run over with --overwrite"
    )


# -- 16: output_dir that is a file, under a file, read-only -------------------------------------------
def test_output_dir_that_is_a_file_or_under_one(tmp_path, capsys):
    a_file = tmp_path / "taken"
    a_file.write_text("x")
    for out, text in ((a_file, "is a file"), (a_file / "run" / "deeper", f"is under {a_file}, which is a file")):
        cfg = write_config(tmp_path, smoke_config(out))
        assert error_of(capsys, "train", str(cfg)) == (
            f"output_dir {out} {text}; output_dir must be a folder (created if missing)"
        )
        assert error_of(capsys, "train", str(cfg), "--check") == (
            f"output_dir {out} {text}; output_dir must be a folder (created if missing)"
        )


def test_output_dir_that_is_or_is_under_a_dangling_or_looping_symlink(tmp_path, capsys):
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    (tmp_path / "loop").symlink_to("loop")
    for out, where, target in (
        (tmp_path / "dangling", "is a symlink", tmp_path / "nowhere"),
        (tmp_path / "loop", "is a symlink", "loop"),
        (tmp_path / "dangling" / "run", f"is under {tmp_path}/dangling, a symlink", tmp_path / "nowhere"),
    ):
        cfg = write_config(tmp_path, smoke_config(out))
        for check in ([], ["--check"]):
            assert error_of(capsys, "train", str(cfg), *check) == (
                f"output_dir {out} {where} to {target}, which does not resolve (missing, or a loop); point it at a "
                "folder, or remove it"
            )
    assert not (tmp_path / "nowhere").exists()


@contextlib.contextmanager
def tmpfs(folder: Path, size: str, read_only: bool = False):
    """A small tmpfs at ``folder`` (root only; the test skips where mounting is not allowed)."""
    folder.mkdir(parents=True, exist_ok=True)
    options = f"size={size}" + (",ro" if read_only else "")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def test_read_only_output_dir(tmp_path, capsys):
    with tmpfs(tmp_path / "ro", "1m", read_only=True) as ro:
        for out in (ro, ro / "run"):
            cfg = write_config(tmp_path, smoke_config(out))
            assert error_of(capsys, "train", str(cfg)) == (
                f"output_dir {out} cannot be written: {ro}: Read-only file system"
            )


# -- 12: --resume at max_steps trains nothing more ------------------------------------------------------
@pytest.mark.slow
def test_resume_of_a_finished_run_does_only_what_is_left(tmp_path):
    out = tmp_path / "run"
    cfg = write_config(tmp_path, smoke_config(out, eval_rows=4))
    result = rlvr("train", str(cfg))
    assert result.returncode == 0, result.stderr[-3000:]
    summary = (out / "summary.json").read_text()
    final_mtime = (out / "final" / "model.safetensors").stat().st_mtime_ns

    result = rlvr("train", str(cfg), "--resume")  # everything done: nothing changes
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout == f"the run in {out} is already complete (step 2, summary.json written): nothing to do\n"
    assert steps(out) == [1, 2] and (out / "summary.json").read_text() == summary
    assert (out / "final" / "model.safetensors").stat().st_mtime_ns == final_mtime

    shutil.rmtree(out / "final")  # as if killed after the last checkpoint
    (out / "summary.json").unlink()
    result = rlvr("train", str(cfg), "--resume")
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"{out}/checkpoint-2 is at the last step (2): no training left; finishing the run" in result.stdout
    assert steps(out) == [1, 2] and not (out / "checkpoint-3").exists()
    weights = (out / "checkpoint-2" / "model.safetensors").read_bytes()
    assert (out / "final" / "model.safetensors").read_bytes() == weights
    resumed = json.loads((out / "summary.json").read_text())
    assert resumed["grpo_steps"] == 2 and resumed["resumed_from"] == str(out / "checkpoint-2")
    assert resumed["eval_after"]["n"] == 4 and "grpo_seconds" not in resumed["stages"]


# -- 13: a kill while saving, with save_total_limit ---------------------------------------------------
@pytest.mark.slow
def test_kill_while_saving_with_save_total_limit_keeps_the_last_complete_checkpoint(tmp_path):
    out = tmp_path / "run"
    cfg = smoke_config(out, max_steps=3, save_total_limit=1)
    cfg["plugins"]["kill-while-saving"] = {}
    path = write_config(tmp_path, cfg)
    killed = rlvr("train", str(path), script=KILLING, env={"RLVR_TEST_KILL_AT_SAVE": "2"})
    assert killed.returncode == -9, killed.stderr[-3000:]
    # checkpoint-2 was written up to its marker: TRL would already have rotated checkpoint-1 away
    assert (out / "checkpoint-2" / "trainer_state.json").exists()
    assert not (out / "checkpoint-2" / PLUGIN_STATE_FILE).exists()
    assert last_complete_checkpoint(out) == str(out / "checkpoint-1")
    resumed = rlvr("train", str(path), "--resume", script=KILLING)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert steps(out) == [1, 2, 3]
    assert json.loads((out / "summary.json").read_text())["resumed_from"] == str(out / "checkpoint-1")
    assert sorted(n for n in os.listdir(out) if n.startswith("checkpoint-")) == ["checkpoint-3"]  # limit 1 kept


# -- 14: disk full while saving a checkpoint ----------------------------------------------------------
def test_checkpoint_names_are_transformers():
    from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

    from rlvr_plugins.checkpoints import CHECKPOINT_PREFIX

    assert CHECKPOINT_PREFIX == PREFIX_CHECKPOINT_DIR


def test_write_errno_recognises_disk_full_from_every_writer():
    assert write_errno(OSError(errno.ENOSPC, "No space left on device")) == errno.ENOSPC
    assert write_errno(OSError(errno.EROFS, "Read-only file system")) == errno.EROFS
    assert write_errno(OSError(errno.ENOENT, "No such file")) is None
    safetensors_error = type("SafetensorError", (Exception,), {})
    assert (
        write_errno(safetensors_error("Error while serializing: I/O error: No space left on device (os error 28)"))
        == errno.ENOSPC
    )
    assert write_errno(RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 64 vs 0")) == errno.EIO
    assert write_errno(RuntimeError("CUDA out of memory")) is None
    assert write_errno(ValueError("bad")) is None


@pytest.mark.slow
def test_disk_full_during_a_checkpoint_names_the_folder_and_keeps_the_last_complete_one(tmp_path):
    with tmpfs(tmp_path / "disk", "900k") as disk:  # policy-init + 2 checkpoints fit, the third does not
        out = disk / "run"
        cfg = write_config(tmp_path, smoke_config(out, max_steps=4))
        result = rlvr("train", str(cfg))
        assert result.returncode == 2, result.stderr[-3000:]
        err = result.stderr.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(
            f"rlvr: error: could not write {out}/checkpoint-3: No space left on device (needs about 3"
        )  # 330 KiB: checkpoint-2's size
        assert err[0].endswith(
            f"KiB free there); the last complete checkpoint, {out}/checkpoint-2, is intact: "
            "free space and continue with --resume"
        )
        assert not (out / "checkpoint-3").exists()  # the half-written one is removed
        assert last_complete_checkpoint(out) == str(out / "checkpoint-2")
        subprocess.run(["mount", "-o", "remount,size=4m", str(disk)], check=True)
        result = rlvr("train", str(cfg), "--resume")
        assert result.returncode == 0, result.stderr[-3000:]
        assert steps(out) == [1, 2, 3, 4]


@pytest.mark.slow
def test_read_only_disk_during_a_checkpoint_names_the_folder_and_keeps_the_last_complete_one(tmp_path):
    with tmpfs(tmp_path / "disk", "4m") as disk:
        out = disk / "run"
        cfg = smoke_config(out, max_steps=3)
        cfg["plugins"]["kill-while-saving"] = {}
        path = write_config(tmp_path, cfg)
        result = rlvr("train", str(path), script=KILLING, env={"RLVR_TEST_READ_ONLY_AT_SAVE": f"2:{disk}"})
        assert result.returncode == 2, result.stderr[-3000:]
        err = result.stderr.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(
            f"rlvr: error: could not write {out}/checkpoint-2: Read-only file system (needs about 3"
        )
        assert err[0].endswith(
            f"free there); the last complete checkpoint, {out}/checkpoint-1, is intact: make it "
            "writable and continue with --resume"
        )
        assert last_complete_checkpoint(out) == str(out / "checkpoint-1")
        subprocess.run(["mount", "-o", "remount,rw", str(disk)], check=True)
        result = rlvr("train", str(path), "--resume", script=KILLING)
        assert result.returncode == 0, result.stderr[-3000:]
        assert steps(out) == [1, 2, 3]


@pytest.mark.slow
def test_disk_full_before_the_first_checkpoint_names_policy_init(tmp_path):
    with tmpfs(tmp_path / "disk", "64k") as disk:  # the run header fits, the 97 KiB policy does not
        out = disk / "run"
        result = rlvr("train", str(write_config(tmp_path, smoke_config(out))))
        assert result.returncode == 2, result.stderr[-3000:]
        assert result.stderr.startswith(f"rlvr: error: could not write {out}/policy-init: No space left on device (")
        assert result.stderr.endswith(" KiB free there)\n") and result.stderr.count("\n") == 1
        assert not (out / "policy-init").exists()


# -- 15: --resume with a larger trainer.max_steps ----------------------------------------------------
@pytest.mark.parametrize(
    "name,warmup",
    [
        ("constant", 0),
        ("constant", 0.5),
        ("constant_with_warmup", 2),
        ("constant_with_warmup", 0.5),
        ("inverse_sqrt", 2),
        ("inverse_sqrt", 0.5),
        ("linear", 0),
        ("linear", 2),
        ("cosine", 0),
        ("polynomial", 2),
    ],
)
def test_max_steps_may_grow_exactly_when_transformers_gives_each_step_the_same_learning_rate(name, warmup):
    """The rule against transformers itself: the rates of steps 0-3 with max_steps 4 and with 8 (warmup as
    TrainingArguments resolves it: a share of max_steps below 1)."""
    import torch
    from transformers import TrainingArguments, get_scheduler

    def rates(max_steps: int) -> list[float]:
        warmup_steps = TrainingArguments("x", use_cpu=True, warmup_steps=warmup).get_warmup_steps(max_steps)
        optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
        scheduler = get_scheduler(name, optimizer, num_warmup_steps=warmup_steps, num_training_steps=max_steps)
        seen = []
        for _ in range(4):
            seen.append(scheduler.get_last_lr()[0])
            optimizer.step()
            scheduler.step()
        return seen

    assert (rates(4) == rates(8)) == (schedule_needs_max_steps(name, warmup) is None)


def test_the_schedule_of_a_config_without_one_is_grpoconfigs_default():
    from trl import GRPOConfig

    assert GRPOConfig.__dataclass_fields__["lr_scheduler_type"].default == TRL_LR_SCHEDULER == "linear"


def test_resume_with_a_larger_max_steps_under_a_decaying_schedule_is_refused_saying_how_to_train_longer(
    tmp_path, capsys
):
    out = tmp_path / "run"
    fake_run(out, smoke_config(out))  # the smoke config has no lr_scheduler_type: GRPOConfig's linear
    longer = str(write_config(tmp_path, smoke_config(out, max_steps=4)))
    rule = (
        "so the learning rate would jump at the resumed step; max_steps may grow only with lr_scheduler_type "
        "constant, constant_with_warmup or inverse_sqrt and warmup_steps 0 or >= 1. To train longer, "
    )
    assert error_of(capsys, "train", longer, "--resume") == (
        f"--resume {out}/checkpoint-2: trainer.max_steps 2 in the run, 4 now: lr_scheduler_type 'linear' lays its "
        f"decay over max_steps, {rule}finish this run with its own config (--resume), then start a new run from its "
        f"final model: model.name_or_path: {out}/final, in another output_dir"
    )
    (out / "final").mkdir()  # a finished run: start the new run from its final model at once
    assert error_of(capsys, "train", longer, "--resume", "--check").endswith(
        f"{rule}start a new run from its final model: model.name_or_path: {out}/final, in another output_dir"
    )

    ratio = tmp_path / "ratio"
    warm = {"lr_scheduler_type": "constant_with_warmup", "warmup_steps": 0.5}
    fake_run(ratio, smoke_config(ratio, **warm))
    assert error_of(
        capsys, "train", str(write_config(tmp_path, smoke_config(ratio, max_steps=4, **warm))), "--resume"
    ).startswith(
        f"--resume {ratio}/checkpoint-2: trainer.max_steps 2 in the run, 4 now: "
        "warmup_steps 0.5 is a share of max_steps, so the learning rate would jump"
    )
    # beside another difference, or smaller: the usual listing of every difference
    other = smoke_config(out, max_steps=4, learning_rate=0.002)
    assert error_of(capsys, "train", str(write_config(tmp_path, other)), "--resume") == (
        f"--resume {out}/checkpoint-2: this config differs from the run's ({out}/config.yaml): trainer.learning_rate: "
        "0.001 in the run, 0.002 now; trainer.max_steps: 2 in the run, 4 now; resume with the run's config, or start "
        "a new run in another output_dir"
    )
    constant = tmp_path / "constant"
    fake_run(constant, smoke_config(constant, max_steps=3, lr_scheduler_type="constant"))
    fewer = smoke_config(constant, max_steps=2, lr_scheduler_type="constant")
    assert "trainer.max_steps: 3 in the run, 2 now" in error_of(
        capsys, "train", str(write_config(tmp_path, fewer)), "--resume"
    )
    assert plan_run(smoke_config(constant, max_steps=5, lr_scheduler_type="constant"), True) == RunStart(
        constant, constant / "checkpoint-2", 2, raised_from=3
    )


class CosineSchedule(Plugin):
    """Sets the learning-rate schedule itself (rlvr_adjust_grpo_config), whatever the config says."""

    name = "cosine-schedule"

    @hookimpl
    def rlvr_adjust_grpo_config(self, grpo_kwargs, trainer_section):
        grpo_kwargs["lr_scheduler_type"] = "cosine"


def test_a_larger_max_steps_is_checked_against_the_schedule_a_plugin_sets(tmp_path, capsys):
    out = tmp_path / "run"
    cfg = smoke_config(out, lr_scheduler_type="constant")
    cfg["plugins"]["cosine-schedule"] = {}
    fake_run(out, cfg)
    longer = smoke_config(out, max_steps=4, lr_scheduler_type="constant")
    longer["plugins"]["cosine-schedule"] = {}
    with temporary_plugin(CosineSchedule):
        assert error_of(capsys, "train", str(write_config(tmp_path, longer)), "--resume", "--check").startswith(
            f"--resume {out}/checkpoint-2: trainer.max_steps 2 in the run, 4 now: lr_scheduler_type 'cosine' lays "
            "its decay over max_steps"
        )


@pytest.mark.slow
def test_resume_with_a_larger_max_steps_under_a_constant_schedule_trains_on_as_one_longer_run(tmp_path):
    """A finished 2-step run resumed with max_steps 4 logs, at every step, what a 4-step run logs (the learning
    rate too), and its final model is that run's."""
    schedule = {"lr_scheduler_type": "constant_with_warmup", "warmup_steps": 1}
    out, reference = tmp_path / "run", tmp_path / "reference"
    reference_run = beside(
        "train", str(write_config(tmp_path, smoke_config(reference, max_steps=4, **schedule), "ref.yaml"))
    )
    first = rlvr("train", str(write_config(tmp_path, smoke_config(out, max_steps=2, **schedule), "short.yaml")))
    assert first.returncode == 0, first.stderr[-3000:]
    longer = write_config(tmp_path, smoke_config(out, max_steps=4, **schedule), "longer.yaml")
    resumed = rlvr("train", str(longer), "--resume")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    whole = reference_run.result()
    assert whole.returncode == 0, whole.stderr[-3000:]
    rows = {
        name: [r for r in read_metrics(folder / "metrics.jsonl") if "loss" in r]
        for name, folder in (("resumed", out), ("whole", reference))
    }
    assert [r["step"] for r in rows["resumed"]] == [r["step"] for r in rows["whole"]] == [1, 2, 3, 4]
    assert rows["whole"][-1]["learning_rate"] == 1e-3  # warmed up, then constant
    for a, b in zip(rows["whole"], rows["resumed"]):
        for key in ("learning_rate", "loss", "reward", "rewards/r1-accuracy/mean", "completions/mean_length"):
            assert b[key] == pytest.approx(a[key], rel=1e-5, abs=1e-7), (a["step"], key)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["grpo_steps"] == 4 and summary["resumed_from"] == str(out / "checkpoint-2")
    from safetensors.torch import load_file

    ours, theirs = load_file(out / "final" / "model.safetensors"), load_file(reference / "final" / "model.safetensors")
    assert max((ours[k] - theirs[k]).abs().max().item() for k in theirs) <= 1e-6
    assert yaml.safe_load((out / "config.yaml").read_text())["trainer"]["max_steps"] == 4  # the run is now 4 steps
    again = rlvr("train", str(longer), "--resume")
    assert again.stdout == f"the run in {out} is already complete (step 4, summary.json written): nothing to do\n"


# -- issue 21, item 5: a kill after the SFT cold start, before GRPO's first checkpoint -------------------------------
def test_resume_without_a_grpo_checkpoint_starts_from_a_complete_policy_init_only(tmp_path, capsys):
    from rlvr_plugins.train.runfolder import POLICY_COMPLETE_FILE

    out = tmp_path / "run"
    cfg = smoke_config(out)
    fake_run(out, cfg, checkpoints=())
    fake_checkpoint(out, 1, complete=False)
    (out / "policy-init").mkdir()
    (out / "policy-init" / "model.safetensors").write_bytes(b"half")  # killed while saving it: no marker
    path = str(write_config(tmp_path, cfg))
    assert cli.main(["train", path, "--resume", "--check"]) == 2
    assert capsys.readouterr().err == (
        f"rlvr: error: --resume: no complete checkpoint in {out}; start the run over with --overwrite\n"
    )
    (out / "policy-init" / POLICY_COMPLETE_FILE).write_text("")
    start = plan_run({**cfg, "trainer": {**cfg["trainer"], "max_steps": 7}}, resume=True)  # no step made yet
    assert start == RunStart(out, from_policy=True)
    with pytest.raises(Exception, match=r"--resume .*policy-init: this config differs from the run's .*learning_rate"):
        plan_run({**cfg, "trainer": {**cfg["trainer"], "learning_rate": 0.5}}, resume=True)


@pytest.mark.slow
def test_a_kill_after_the_sft_resumes_grpo_from_policy_init_as_the_uninterrupted_run(tmp_path):
    def sft_config(out):
        cfg = smoke_config(out, eval_rows=4)
        cfg["sft"] = yaml.safe_load(SMOKE.read_text())["sft"]
        cfg["plugins"]["kill-while-saving"] = {}
        return cfg

    a, b = tmp_path / "a", tmp_path / "b"
    uninterrupted = beside("train", str(write_config(tmp_path, sft_config(a), "a.yaml")), script=KILLING)
    path = write_config(tmp_path, sft_config(b), "b.yaml")
    killed = rlvr("train", str(path), script=KILLING, env={"RLVR_TEST_KILL_AT_SAVE": "1"})
    assert killed.returncode == -9, killed.stderr[-3000:]
    assert last_complete_checkpoint(b) is None and (b / "checkpoint-1").is_dir()  # killed in GRPO's first save
    weights = (b / "policy-init" / "model.safetensors").read_bytes()
    resumed = rlvr("train", str(path), "--resume", script=KILLING)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    whole = uninterrupted.result()
    assert whole.returncode == 0, whole.stderr[-3000:]
    assert (
        f"--resume: no complete GRPO checkpoint in {b}; GRPO starts from the complete {b / 'policy-init'} "
        "(the SFT cold start is not redone)"
    ) in resumed.stdout
    assert (b / "policy-init" / "model.safetensors").read_bytes() == weights
    ours, theirs = (json.loads((run / "summary.json").read_text()) for run in (b, a))
    assert "sft_seconds" not in ours["stages"] and ours["sft_examples"] == theirs["sft_examples"] == 32
    assert ours["eval_before"]["accuracy"] == theirs["eval_before"]["accuracy"]
    assert steps(b) == steps(a) == [1, 2]
    rows = [[r for r in read_metrics(run / "metrics.jsonl") if "loss" in r] for run in (a, b)]
    for ra, rb in zip(*rows, strict=True):
        for key in ("loss", "reward", "rewards/r1-accuracy/mean", "completions/mean_length"):
            assert ra[key] == pytest.approx(rb[key], rel=1e-5, abs=1e-7), (ra["step"], key)


# -- issue 21, item 10: a full disk at curves.png, the run's last file -----------------------------------------------
def test_a_full_disk_at_curves_png_is_one_line_and_resume_draws_them_instead_of_saying_complete(
    tmp_path, capsys, monkeypatch
):
    import errno

    from matplotlib.figure import Figure

    from rlvr_plugins.train.run import _write_curves

    out = tmp_path / "run"
    cfg = smoke_config(out, max_steps=2)
    fake_run(out, cfg, checkpoints=(1,))
    fake_checkpoint(out, 2, max_steps=2)
    (out / "final").mkdir()
    (out / "summary.json").write_text(json.dumps({"grpo_steps": 2}))
    rows = [{"step": s, "loss": 0.1, "reward": 0.5 * s} for s in (1, 2)]
    (out / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    real_savefig = Figure.savefig

    def no_space(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(Figure, "savefig", no_space)
    with pytest.raises(Exception) as err:  # what the end of rlvr train meets
        _write_curves(out)
    assert str(err.value) == (
        f"plot '{out / 'curves.png'}' could not be written: no space left on the device; nothing was written there; "
        "the run itself is complete (final/, summary.json): free space and run rlvr train CONFIG --resume to draw it"
    )
    assert not (out / "curves.png").exists() and not list(out.glob(".curves.png*"))
    monkeypatch.setattr(Figure, "savefig", real_savefig)
    path = write_config(tmp_path, cfg)
    assert cli.main(["train", str(path), "--resume"]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith(
        f"the run in {out} is complete (step 2, summary.json written) but has no curves.png (its writing failed): "
        "drawing it\n"
    )
    assert (out / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert cli.main(["train", str(path), "--resume"]) == 0
    assert capsys.readouterr().out == (
        f"the run in {out} is already complete (step 2, summary.json written): nothing to do\n"
    )
