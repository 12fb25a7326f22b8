"""The run folder of ``rlvr train``: what a fresh run, a resumed run and ``--overwrite`` may find there.

Everything here is checked before a heavy library is imported or a model loaded
(:func:`plan_run`), and imports nothing heavy itself:

* a fresh run needs an ``output_dir`` that is (or can be made) a writable folder holding
  no earlier run; ``--overwrite`` removes the earlier run's entries (only those);
* ``--resume [CHECKPOINT]`` needs a complete checkpoint whose run was made with this
  config (up to :data:`RESUME_MAY_DIFFER`, and a larger ``trainer.max_steps`` under a
  learning-rate schedule that does not depend on it: :func:`schedule_needs_max_steps`),
  and an ``output_dir`` that is that run's folder or holds no run;
* a checkpoint already at ``max_steps`` trains nothing more (:attr:`RunStart.finished`).

Write errors while the run writes its folder (disk full, read-only) become one
:class:`RunFolderError` naming the folder, the space needed and the space free
(:func:`write_error`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ..checkpoints import (
    CHECKPOINT_PREFIX,
    PLUGIN_STATE_FILE,
    TRAINER_STATE_FILE,
    _checkpoint_step,
    complete_checkpoints,
    last_complete_checkpoint,
)
from ..errors import RunFolderError
from ..outputs import is_main_process, write_atomic
from .validate import run_config

logger = logging.getLogger(__name__)

DEFAULT_OUTPUT_DIR = "runs/rlvr"
CONFIG_FILE = "config.yaml"
SUMMARY_FILE = "summary.json"
FINAL_DIR = "final"
CURVES_FILE = "curves.png"
POLICY_DIR = "policy-init"
POLICY_COMPLETE_FILE = "rlvr_policy_complete"
"""Written last into ``policy-init/`` (the SFT'd or built policy GRPO starts from): the folder is whole."""
STAGING_DIR = ".rlvr-resume-partial"  # continue_in copies here first

# What rlvr train writes into output_dir (besides checkpoint-*). The first group marks a folder
# as holding a run; config.yaml and README.md are also removed by --overwrite, but alone they
# may be the user's own files.
RUN_MARKS = (
    "plugins.json",
    "metrics.jsonl",
    "metrics.tmp",
    SUMMARY_FILE,
    "sft",
    "policy-init",
    FINAL_DIR,
    FINAL_DIR + ".partial",
)
RUN_EXTRAS = (CONFIG_FILE, "README.md")

# Config keys a resumed run may change: where things are written and how often, never what is
# trained (the learning-rate schedule, the rewards, the data, the engine's deadline all stay).
RESUME_MAY_DIFFER = frozenset(
    {
        "output_dir",
        "trainer.logging_steps",
        "trainer.save_steps",
        "trainer.save_total_limit",
        "trainer.disable_tqdm",
        "trainer.report_to",
        "trainer.run_name",
        "trainer.logging_dir",
        "engine.workers",
    }
)

# trainer.max_steps may grow on --resume only under these schedules: transformers builds the scheduler
# again from the new max_steps and a checkpoint restores only its step count (schedule_needs_max_steps).
SCHEDULES_WITHOUT_MAX_STEPS = ("constant", "constant_with_warmup", "inverse_sqrt")
TRL_LR_SCHEDULER = "linear"  # GRPOConfig's default lr_scheduler_type

_SHOWN = 60  # characters of a config value echoed in a message


@dataclass(frozen=True)
class RunStart:
    """How a run starts, decided before anything heavy is loaded.

    ``checkpoint`` is the complete checkpoint to resume from (None: a fresh run, or ``from_policy``), ``step``
    its global step; ``finished``: it is already at ``max_steps``, so only what is left
    after training (``final/``, the eval after, ``summary.json``) is done; ``raised_from``:
    the run's ``trainer.max_steps`` when this config raises it (0: not raised).
    """

    out: Path
    checkpoint: Path | None = None
    step: int = 0
    finished: bool = False
    overwrite: bool = False
    raised_from: int = 0
    from_policy: bool = False
    """``--resume`` of a run killed after its ``policy-init/`` was complete and before GRPO's first complete
    checkpoint: GRPO starts from ``policy-init/`` (the SFT cold start is not redone)."""

    @property
    def run_folder(self) -> Path:
        """The folder of the run being continued (its ``policy-init/``, ``config.yaml``)."""
        return self.checkpoint.parent if self.checkpoint is not None else self.out


def output_dir(config: Mapping[str, Any]) -> Path:
    """The run folder, ``~`` expanded as transformers expands it (else its checkpoints would land in
    ``$HOME/...`` and the rest of the run in ``./~/...``)."""
    return Path(os.path.expanduser(str(run_config(config).output_dir or DEFAULT_OUTPUT_DIR)))


def plan_run(config: Mapping[str, Any], resume: str | bool | None = None, overwrite: bool = False) -> RunStart:
    """Check ``output_dir`` and the ``--resume`` / ``--overwrite`` choice; change nothing."""
    out = output_dir(config)
    if overwrite and resume:
        raise RunFolderError("--overwrite starts the run over from nothing; it cannot be combined with --resume")
    check_output_dir(out)
    if not resume:
        if not overwrite:
            check_no_run(out)
        check_no_user_files(out)
        return RunStart(out, overwrite=overwrite)
    if resume is True and last_complete_checkpoint(out) is None and policy_complete(out / POLICY_DIR):
        check_same_config(out / POLICY_DIR, config, steps_done=False)
        return RunStart(out, from_policy=True)
    checkpoint = find_checkpoint(out, resume)
    step, max_steps = checkpoint_progress(checkpoint)
    check_resume_target(out, checkpoint, step)
    raised_from = check_same_config(checkpoint, config)
    return RunStart(out, checkpoint, step, finished=not raised_from and 0 < max_steps <= step, raised_from=raised_from)


def check_resume_target(out: Path, checkpoint: Path, step: int) -> None:
    """Resuming ``checkpoint`` (at ``step``) into ``out``: its own folder holds no newer complete
    checkpoint; another folder holds no run and no file of the user's that the run would overwrite."""
    run_folder = checkpoint.parent
    if not _same_folder(run_folder, out):
        entries = run_entries(out) if is_main_process() else []  # the others would see the main's first writes
        if entries:
            raise RunFolderError(
                f"--resume {checkpoint}: output_dir {out} holds another run ({_listing(entries)}); resume into the "
                f"checkpoint's own folder {run_folder} or into an output_dir that holds no run"
            )
        check_no_user_files(out)
    else:
        newer = [name for s, name in complete_checkpoints(out) if s > step]
        if newer:
            raise RunFolderError(
                f"--resume {checkpoint}: {out} holds newer complete checkpoints ({_listing(newer)}) that the resumed "
                "run would mix with its own; resume from the newest (--resume alone), or move them away"
            )


def check_still_free(start: RunStart) -> None:
    """Under the run's lock (:func:`exclusive`), again what :func:`plan_run` checked about the folder: another
    run may have written there between the plan and the lock (it ended just then)."""
    if start.checkpoint is not None:
        check_resume_target(start.out, start.checkpoint, start.step)
    elif start.from_policy:
        if last_complete_checkpoint(start.out) is not None:
            raise RunFolderError(
                f"--resume: {start.out} holds a complete checkpoint now (another run wrote it); run --resume again"
            )
    elif not start.overwrite:
        check_no_run(start.out)


def check_no_run(out: Path) -> None:
    """A fresh run (no --resume, no --overwrite) needs a folder that holds no run (checked by the main process:
    the others would see its header)."""
    entries = run_entries(out) if is_main_process() else []
    if entries:
        raise RunFolderError(
            f"output_dir {out} already holds a run ({_listing(entries)}): continue it with --resume, start it "
            "over with --overwrite (removes those entries), or choose another output_dir"
        )


def check_no_user_files(out: Path) -> None:
    """The run would write its ``config.yaml`` (and TRL its model card, ``README.md``) into ``out``: a
    file of that name there with no run beside it is the user's own, and is never overwritten."""
    names = sorted(os.listdir(out)) if is_main_process() and out.is_dir() and not run_entries(out) else []
    mine = [name for name in names if name in RUN_EXTRAS]
    if mine:
        raise RunFolderError(
            f"output_dir {out} holds {_listing(mine)} of your own (no run beside it), which the run would overwrite "
            "with its resolved config and TRL's model card; move it, or choose another output_dir"
        )


@contextlib.contextmanager
def exclusive(out: Path) -> Iterator[None]:
    """Hold ``out``'s lock (``flock`` on the folder itself) for a run: a second run into it stops at once.

    Only the main process locks; where the file system has no locks (``ENOLCK``), the run goes on unlocked.
    """
    import fcntl

    if not is_main_process():
        yield
        return
    out.mkdir(parents=True, exist_ok=True)
    fd = os.open(out, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            raise RunFolderError(
                f"output_dir {out} is in use by another rlvr train that is running now; wait for it "
                "to end, or choose another output_dir"
            ) from exc
        except OSError as exc:
            logger.warning("output_dir %s cannot be locked (%s): nothing stops a second run into it", out, exc.strerror)
        yield
    finally:
        os.close(fd)


def continue_in(out: Path, start: RunStart) -> None:
    """Resuming into a folder other than the checkpoint's: copy its ``policy-init/`` and its
    ``metrics.jsonl`` (rows up to the checkpoint's step), so that ``out`` is a whole run folder.

    All or nothing: both are copied into a staging folder first and renamed into ``out`` at the
    end, so that a full disk or a kill mid-copy leaves no half ``policy-init/`` (which would
    make ``out`` look like another run's folder and stop the retried resume)."""
    source = start.run_folder
    names = [
        name
        for name, there in (
            ("policy-init", (source / "policy-init").is_dir()),
            ("metrics.jsonl", (source / "metrics.jsonl").is_file()),
        )
        if there and not (out / name).exists()
    ]
    staging = out / STAGING_DIR
    shutil.rmtree(staging, ignore_errors=True)  # left by a kill mid-copy
    try:
        staging.mkdir(parents=True)
        for name in names:
            if name == "policy-init":
                shutil.copytree(source / name, staging / name)
            else:
                shutil.copyfile(source / name, staging / name)
                truncate_metrics(staging / name, start.step)
        for name in names:
            os.replace(staging / name, out / name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def policy_complete(folder: Path) -> bool:
    """``folder`` (a run's ``policy-init/``) was written to the end (:func:`mark_policy_complete`)."""
    return (folder / POLICY_COMPLETE_FILE).is_file()


def mark_policy_complete(folder: Path) -> None:
    """Mark ``policy-init/`` whole, after the model and tokenizer are saved in it (main process)."""
    if is_main_process():
        (folder / POLICY_COMPLETE_FILE).write_text("", encoding="utf-8")


def start_from_policy(out: Path) -> None:
    """``--resume`` from ``policy-init/``: remove what the killed GRPO stage left (checkpoints that never became
    complete, metrics logged after the policy was made: they are logged again) so that the run goes on as the
    uninterrupted run would have."""
    for name in sorted(os.listdir(out)):
        if _checkpoint_step(name) is not None and (out / name).is_dir():
            logger.warning("%s is incomplete (interrupted while saving): removed", out / name)
            shutil.rmtree(out / name)
    truncate_metrics(out / "metrics.jsonl", -1)


def check_output_dir(out: Path) -> None:
    """``out`` is a folder, or can be created as one, and can be written to."""
    existing = out
    while not os.path.lexists(existing) and existing != existing.parent:
        existing = existing.parent
    if existing.is_symlink() and not existing.exists():
        where = "is a symlink" if existing == out else f"is under {existing}, a symlink"
        raise RunFolderError(
            f"output_dir {out} {where} to {os.readlink(existing)}, which does not resolve (missing, "
            "or a loop); point it at a folder, or remove it"
        )
    if existing.exists() and not existing.is_dir():
        where = "is a file" if existing == out else f"is under {existing}, which is a file"
        raise RunFolderError(f"output_dir {out} {where}; output_dir must be a folder (created if missing)")
    try:
        fd, probe = tempfile.mkstemp(prefix=".rlvr-write-test-", dir=existing)
    except OSError as exc:
        raise RunFolderError(f"output_dir {out} cannot be written: {existing}: {exc.strerror}") from exc
    os.close(fd)
    os.unlink(probe)


def run_entries(out: Path) -> list[str]:
    """The names in ``out`` that an earlier ``rlvr train`` left (empty when it holds no run)."""
    if not out.is_dir():
        return []
    names = sorted(os.listdir(out))
    marks = [n for n in names if n in RUN_MARKS or _checkpoint_step(n) is not None]
    return sorted(marks + [n for n in names if n in RUN_EXTRAS]) if marks else []


def clear_run(out: Path) -> list[str]:
    """``--overwrite``: remove what :func:`run_entries` lists (nothing else in ``out``); return the names."""
    entries = run_entries(out)
    for name in sorted(entries, key=lambda n: n in RUN_MARKS):  # checkpoints and extras first, marks last
        path = out / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
    return entries


def find_checkpoint(out: Path, resume: str | bool) -> Path:
    """The checkpoint ``--resume`` names (``True``: the newest complete one in ``out``), checked."""
    if resume is True:
        found = last_complete_checkpoint(out)
        if found is None:
            raise RunFolderError(f"--resume: no complete checkpoint in {out}; start the run over with --overwrite")
        step = _checkpoint_step(Path(found).name) or 0
        for name in sorted(n for n in os.listdir(out) if (_checkpoint_step(n) or 0) > step):
            logger.warning("%s is incomplete (interrupted while saving): resuming from %s", out / name, found)
        return Path(found)
    path = Path(str(resume))
    if not path.exists():
        raise RunFolderError(f"--resume {path}: no such folder")
    if not path.is_dir():
        raise RunFolderError(f"--resume {path}: is a file; give a checkpoint folder ({CHECKPOINT_PREFIX}-<step>)")
    if not (path / PLUGIN_STATE_FILE).is_file():
        raise RunFolderError(
            f"--resume {path}: not a complete checkpoint of rlvr train (no {PLUGIN_STATE_FILE}, its last file: the "
            "save was interrupted, or it is not a checkpoint)"
        )
    return path


def checkpoint_progress(checkpoint: Path) -> tuple[int, int]:
    """``(global_step, max_steps)`` from the checkpoint's ``trainer_state.json``."""
    try:
        state = json.loads((checkpoint / TRAINER_STATE_FILE).read_text(encoding="utf-8"))
        return int(state["global_step"]), int(state.get("max_steps") or 0)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise RunFolderError(f"--resume {checkpoint}: cannot read {TRAINER_STATE_FILE}: {exc}") from exc


def check_same_config(checkpoint: Path, config: Mapping[str, Any], steps_done: bool = True) -> int:
    """The run that wrote ``checkpoint`` (its folder's ``config.yaml``) was made with ``config``, up to
    :data:`RESUME_MAY_DIFFER` and a larger ``trainer.max_steps`` (:func:`check_more_steps`). Returns the
    run's ``trainer.max_steps`` when ``config`` raises it, else 0. ``steps_done=False`` (GRPO has not made
    a step yet: ``checkpoint`` is ``policy-init/``): ``trainer.max_steps`` may be anything."""
    from .config import dump_public

    path = checkpoint.parent / CONFIG_FILE
    try:
        before = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise RunFolderError(
            f"--resume {checkpoint}: cannot read the run's config {path} to check that this config continues it: {exc}"
        ) from exc
    now = yaml.safe_load(dump_public(config))
    differ = [key for key in config_differences(before, now) if key not in RESUME_MAY_DIFFER]
    if not steps_done and "trainer.max_steps" in differ:
        differ.remove("trainer.max_steps")
    old, new = _get(before, "trainer.max_steps"), _get(now, "trainer.max_steps")
    raised = "trainer.max_steps" in differ and all(type(n) is int for n in (old, new)) and 0 < old < new
    if raised:
        schedule = (_get(now, "trainer.lr_scheduler_type", TRL_LR_SCHEDULER), _get(now, "trainer.warmup_steps", 0))
        if differ == ["trainer.max_steps"]:
            check_more_steps(checkpoint, old, new, *schedule)
        if schedule_needs_max_steps(*schedule) is None:
            differ.remove("trainer.max_steps")
    if differ:
        shown = "; ".join(
            f"{key}: {_short(_get(before, key))} in the run, {_short(_get(now, key))} now" for key in differ[:8]
        )
        more = f" (and {len(differ) - 8} more)" if len(differ) > 8 else ""
        raise RunFolderError(
            f"--resume {checkpoint}: this config differs from the run's ({path}): {shown}{more}; resume with the "
            "run's config, or start a new run in another output_dir"
        )
    return old if raised else 0


def schedule_needs_max_steps(lr_scheduler_type: str, warmup_steps: float) -> str | None:
    """Why the learning rate at a step depends on ``trainer.max_steps`` under this schedule (None: it does not).

    transformers builds the scheduler from ``max_steps`` (``get_scheduler(num_training_steps=max_steps)``)
    and a checkpoint restores only its step count. ``linear``, ``cosine``, ``polynomial``, ``wsd``... lay
    their decay over ``max_steps``: with a larger one, the learning rate at the resumed step ``s`` jumps
    (``linear``: from ``lr·(T-s)/T`` to ``lr·(T'-s)/T'``). A ``warmup_steps`` below 1 is a share of
    ``max_steps``. ``constant`` (no warmup), ``constant_with_warmup`` and ``inverse_sqrt`` with
    ``warmup_steps`` 0 or a number of steps (>= 1) give every step the same rate whatever ``max_steps`` is.
    """
    name = str(getattr(lr_scheduler_type, "value", lr_scheduler_type))
    if name not in SCHEDULES_WITHOUT_MAX_STEPS:
        return f"lr_scheduler_type {name!r} lays its decay over max_steps"
    if name != "constant" and 0 < float(warmup_steps) < 1:
        return f"warmup_steps {warmup_steps} is a share of max_steps"
    return None


def check_more_steps(checkpoint: Path, before: int, now: int, lr_scheduler_type: str, warmup_steps: float) -> None:
    """``--resume`` with ``trainer.max_steps`` raised from ``before`` to ``now``: refused, in one line saying
    how to train longer, when the learning-rate schedule depends on ``max_steps`` (:func:`schedule_needs_max_steps`)."""
    problem = schedule_needs_max_steps(lr_scheduler_type, warmup_steps)
    if problem is None:
        return
    run = checkpoint.parent
    final = run / FINAL_DIR
    first = "" if final.is_dir() else "finish this run with its own config (--resume), then "
    raise RunFolderError(
        f"--resume {checkpoint}: trainer.max_steps {before} in the run, {now} now: {problem}, so the learning rate "
        f"would jump at the resumed step; max_steps may grow only with lr_scheduler_type "
        f"{', '.join(SCHEDULES_WITHOUT_MAX_STEPS[:-1])} or {SCHEDULES_WITHOUT_MAX_STEPS[-1]} and warmup_steps 0 or "
        f">= 1. To train longer, {first}start a new "
        f"run from its final model: model.name_or_path: {final}, in another output_dir"
    )


_MISSING = object()


def config_differences(a: Any, b: Any, prefix: str = "") -> list[str]:
    """Dotted keys whose values differ between two config trees (a key missing on one side differs)."""
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        keys = list(a) + [k for k in b if k not in a]
        return [d for k in keys for d in config_differences(a.get(k, _MISSING), b.get(k, _MISSING), f"{prefix}{k}.")]
    same = (
        type(a) is type(b)
        and a == b
        or (
            isinstance(a, (int, float))
            and isinstance(b, (int, float))
            and not isinstance(a, bool)
            and not isinstance(b, bool)
            and a == b
        )
    )
    return [] if same else [prefix.rstrip(".")]


def _get(tree: Any, key: str, default: Any = _MISSING) -> Any:
    for part in key.split("."):
        tree = tree.get(part, _MISSING) if isinstance(tree, Mapping) else _MISSING
    return default if tree is _MISSING else tree


def _short(value: Any) -> str:
    text = "(not set)" if value is _MISSING else repr(value)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."


def _listing(names: list[str], shown: int = 6) -> str:
    return ", ".join(names[:shown]) + (f" and {len(names) - shown} more" if len(names) > shown else "")


VERSIONED = ("rlvr-plugins", "trl", "transformers", "torch", "accelerate", "math-verify", "pluggy")


def versions() -> dict[str, str]:
    """The installed version of each distribution of :data:`VERSIONED` (``"not installed"`` when absent)."""
    import importlib.metadata as md

    out = {}
    for dist in VERSIONED:
        try:
            out[dist] = md.version(dist)
        except md.PackageNotFoundError:
            out[dist] = "not installed"
    return out


def run_header(plugin_set) -> dict[str, Any]:
    """What a run's ``plugins.json`` (and a command's ``<section>_plugins.json``) holds: the resolved
    plugins (``PluginSet.describe()``), every reward with its plugin, weight and isolation, and :func:`versions`."""
    return {
        "plugins": plugin_set.describe(),
        "rewards": [
            {"plugin": p, "name": r.name, "weight": r.weight, "isolated": r.isolated}
            for p, r in plugin_set.reward_functions()
        ],
        "versions": versions(),
    }


def read_json(path: Path) -> dict[str, Any] | None:
    """The JSON object in ``path``; None when there is no such file; :class:`RunFolderError` naming
    the file when it is not valid UTF-8 JSON or not an object."""
    if not path.is_file():
        return None
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise RunFolderError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from exc
    except UnicodeDecodeError as exc:
        raise RunFolderError(f"{path}: not valid UTF-8 (byte {exc.start}); the file is corrupt") from exc
    if not isinstance(value, dict):
        raise RunFolderError(f"{path}: expected a JSON object")
    return value


def _same_folder(a: Path, b: Path) -> bool:
    return a.resolve() == b.resolve()


def truncate_metrics(path: str | Path, last_step: int) -> None:
    """Drop rows logged after ``last_step`` (a resumed run logs them again), atomically; a last row
    torn by a kill or a full disk (not valid JSON) is dropped too."""
    path = Path(path)
    if not path.exists():
        return
    kept = [
        line
        for line in path.read_text(encoding="utf-8").splitlines()
        if (row := _row(line)) is not None and row.get("step", 0) <= last_step
    ]
    write_atomic(path, (line + "\n" for line in kept), what="metrics file")


def _row(line: str) -> dict | None:
    try:
        row = json.loads(line)
    except ValueError:
        return None
    return row if isinstance(row, dict) else None


def run_readme(config: Mapping[str, Any], plugins: list[str]) -> str:
    """The run folder's ``README.md`` (written at every checkpoint in place of TRL's model card): what was trained,
    from what, with which plugins, and what the folder holds.

    >>> print(run_readme({"output_dir": "runs/demo", "model": {"tiny": {}}}, ["r1-accuracy", "grpo"]))
    # runs/demo: an rlvr-plugins run
    <BLANKLINE>
    GRPO (TRL's GRPOTrainer) with the plugins r1-accuracy, grpo,
    trained by `rlvr train` from a tiny Qwen3 built from model.tiny.
    <BLANKLINE>
    - `config.yaml`: the resolved config; `rlvr train config.yaml --resume` continues the run
    - `plugins.json`: the plugins with their versions and options; `metrics.jsonl`: every logged step
    - `checkpoint-<step>/`: complete checkpoints; `final/`: the trained policy (`from_pretrained` loads it)
    - `summary.json`, `curves.png`: held-out accuracy before, during and after GRPO
    <BLANKLINE>
    """
    sections = run_config(config)
    model = sections.model
    source = (
        f"the policy {model.name_or_path}"
        if model is not None and model.name_or_path
        else "a tiny Qwen3 built from model.tiny"
        if model is not None and model.tiny is not None
        else "the configured policy"
    )
    lines = [
        f"# {sections.output_dir or DEFAULT_OUTPUT_DIR}: an rlvr-plugins run",
        "",
        f"GRPO (TRL's GRPOTrainer) with the plugins {', '.join(plugins)},",
        f"trained by `rlvr train` from {source}.",
        "",
        "- `config.yaml`: the resolved config; `rlvr train config.yaml --resume` continues the run",
        "- `plugins.json`: the plugins with their versions and options; `metrics.jsonl`: every logged step",
        "- `checkpoint-<step>/`: complete checkpoints; `final/`: the trained policy (`from_pretrained` loads it)",
        "- `summary.json`, `curves.png`: held-out accuracy before, during and after GRPO",
        "",
    ]
    return "\n".join(lines)
