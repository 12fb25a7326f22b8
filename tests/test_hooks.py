"""Every hook: its call count and order in real runs against the table of docs/hooks.md, the
one call path (tracing, monitors, refused pluggy options), and one behaviour test per hook
(``test_hook_<name>``, Datasette's meta-test checks that each exists)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace
from typing import ClassVar

import pytest
import torch
import yaml

from rlvr_plugins import Environment, Plugin, RewardFunction, cli, hookimpl, hookspecs
from rlvr_plugins.errors import ConfigError, PluginConflictError, PluginError, PluginValidationError
from rlvr_plugins.manager import (
    HOOK_NAMES,
    build_plugin_set,
    monitoring,
    temporary_plugin,
)
from rlvr_plugins.testing import TINY
from rlvr_plugins.testing.recorder import HookRecorder

REPO = Path(__file__).resolve().parents[1]
HOOKS_MD = REPO / "docs" / "hooks.md"
COLUMNS = {"check": "`--check`", "train": "`train`", "eval": "`eval`"}


def hook_table() -> dict[str, dict[str, str]]:
    """docs/hooks.md's hook table, in its row order: ``{hook: {column: cell}}``."""
    lines = [
        line for line in HOOKS_MD.read_text(encoding="utf-8").splitlines() if line.startswith(("| `rlvr_", "| hook |"))
    ]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    table = {}
    for line in lines[1:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        table[cells[0].strip("`")] = dict(zip(header, cells))
    return table


def expected_calls(column: str, plugins: dict, sizes: dict[str, int]) -> dict[str, int]:
    """Calls per hook that the table promises: the column's count per implementing plugin."""
    plugin_set = build_plugin_set(plugins)
    out = {}
    for hook, row in hook_table().items():
        cell = row[COLUMNS[column]]
        per_plugin = int(cell) if cell.isdigit() else sizes[cell]
        out[hook] = per_plugin * len(plugin_set.implementers(hook))
    return {hook: n for hook, n in out.items() if n}


class Probe(Plugin):
    """Implements every hook that several plugins may implement; changes nothing, records what it sees."""

    name = "probe"
    seen: ClassVar[dict] = {}

    @hookimpl
    def rlvr_register_commands(self, subparsers):
        pass

    @hookimpl
    def rlvr_adjust_grpo_config(self, grpo_kwargs):
        pass

    @hookimpl
    def rlvr_reward_functions(self, register):
        pass

    @hookimpl
    def rlvr_environments(self, register):
        pass

    @hookimpl
    def rlvr_validate_run(self, reward_names):
        pass

    @hookimpl
    def rlvr_claims(self):
        return None

    @hookimpl
    def rlvr_check_dataset(self, rows, split):
        return None

    @hookimpl
    def rlvr_sft_examples(self, rows):
        return None

    @hookimpl
    def rlvr_rollout_func(self):
        return None

    @hookimpl
    def rlvr_rollout_segments(self):
        return None

    @hookimpl
    def rlvr_trainer_callbacks(self, trainer):
        return None

    @hookimpl
    def rlvr_length_penalty(self, completion_lengths):
        return None

    @hookimpl
    def rlvr_on_rewards(self, example_indices, log_metric):
        Probe.seen.setdefault("on_rewards", []).append(len(example_indices))
        log_metric("probe/rows", float(len(example_indices)))

    @hookimpl
    def rlvr_state_dict(self):
        return {"batches": len(Probe.seen.get("on_rewards", []))}

    @hookimpl
    def rlvr_load_state_dict(self, state):
        Probe.seen["loaded"] = state


PLUGINS = {"probe": {}, "r1-accuracy": {}}
SIZES = {"splits": 2, "rows": 8 + 4, "batches": 1, "checkpoints": 1, "rounds": 1}


def write_config(tmp_path: Path, **extra) -> Path:
    path = tmp_path / "c.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "output_dir": str(tmp_path / "run"),
                "seed": 0,
                "model": {"tiny": TINY},
                "data": {
                    "train": {"source": "synthetic", "task": "arithmetic", "size": 8, "seed": 0},
                    "eval": {"source": "synthetic", "task": "arithmetic", "size": 4, "seed": 0},
                },
                "plugins": PLUGINS,
                "engine": {"in_process": True},
                "eval": {"reward": "r1-accuracy", "batch_size": 4, "max_new_tokens": 4},
                "trainer": {
                    "max_steps": 1,
                    "per_device_train_batch_size": 4,
                    "num_generations": 4,
                    "max_completion_length": 4,
                    "learning_rate": 1e-3,
                    "save_steps": 1,
                    "use_cpu": True,
                    "disable_tqdm": True,
                    "beta": 0.0,
                },
                **extra,
            }
        )
    )
    return path


@pytest.fixture
def probe():
    Probe.seen = {}
    with temporary_plugin(Probe):
        yield Probe


# -- the table, against real runs ----------------------------------------------------------


def test_the_table_lists_every_hook_once():
    assert sorted(hook_table()) == sorted(HOOK_NAMES)


def assert_matches_table(recorder: HookRecorder, column: str, sizes: dict[str, int]) -> None:
    expected = expected_calls(column, PLUGINS, sizes)
    assert recorder.counts() == expected
    assert recorder.order() == [h for h in hook_table() if h in expected]


def test_train_check_calls_each_hook_as_the_table_says(tmp_path, probe, hook_recorder):
    path = write_config(tmp_path)
    assert cli.main(["train", str(path), "--check"]) == 0
    assert_matches_table(hook_recorder, "check", SIZES)


@pytest.fixture(scope="module")
def one_step_run(tmp_path_factory):
    """``rlvr train`` for one GRPO step with the probe enabled: ``(run folder, recorder)``."""
    tmp_path = tmp_path_factory.mktemp("one-step")
    path = write_config(tmp_path)
    recorder = HookRecorder()
    Probe.seen = {}
    with temporary_plugin(Probe), monitoring(None, recorder.calls.append):
        assert cli.main(["train", str(path)]) == 0
    return tmp_path / "run", recorder


@pytest.mark.slow
def test_one_training_step_calls_each_hook_as_the_table_says(one_step_run, probe):
    _, recorder = one_step_run
    assert_matches_table(recorder, "train", SIZES)


@pytest.mark.slow
def test_rlvr_eval_calls_each_hook_as_the_table_says(tmp_path, probe, hook_recorder):
    path = write_config(tmp_path)
    assert cli.main(["eval", str(path), "--set", "eval.n=1"]) == 0
    assert_matches_table(hook_recorder, "eval", {"splits": 1, "rows": 4})


def test_trace_prints_one_block_per_hook_call(tmp_path, monkeypatch, capsys, hook_recorder):
    monkeypatch.setenv("RLVR_TRACE_PLUGINS", "1")
    assert (
        cli.main(["train", str(REPO / "configs" / "demo.yaml"), "--check", "--set", f"output_dir={tmp_path / 'run'}"])
        == 0
    )
    err = capsys.readouterr().err
    blocks = re.findall(r"^rlvr trace: (rlvr_\w+) \[([\w-]+)\] [\d.]+ ms$", err, flags=re.MULTILINE)
    assert blocks == [(call.hook, call.plugin) for call in hook_recorder.calls]
    demo = yaml.safe_load((REPO / "configs" / "demo.yaml").read_text())["plugins"]
    assert len(blocks) == sum(expected_calls("check", demo, {"splits": 2}).values()) > 0
    assert "    reward_names = ['r1-accuracy', 'r1-format']" in err
    assert re.search(r"    grpo_args = (?:GRPOConfig|namespace)\(.{150,}\.\.\. \(\d+ chars\)", err)  # long values cut


def test_trace_shows_tensors_as_shapes(monkeypatch, capsys):
    monkeypatch.setenv("RLVR_TRACE_PLUGINS", "1")
    ps = build_plugin_set(None)
    ps.one(
        "rlvr_compute_advantages",
        rewards=torch.tensor([1.0, 0.0]),
        num_generations=2,
        valid=torch.tensor([True, True]),
        rewards_per_func=torch.zeros(2, 1),
        reward_names=["r"],
        reward_weights=torch.ones(1),
    )
    err = capsys.readouterr().err
    assert "rlvr trace: rlvr_compute_advantages [grpo]" in err
    assert "rewards = Tensor(shape=(2,), dtype=torch.float32)" in err
    assert "-> Tensor(shape=(2,), dtype=torch.float32)" in err


def test_a_monitor_sees_each_plugin_call_with_result_and_time():
    class Two(Plugin):
        name = "two"

        @hookimpl
        def rlvr_check_dataset(self, rows):
            return [(0, "two")]

    class One(Two):
        name = "one"

        @hookimpl
        def rlvr_check_dataset(self, rows):
            return None

    with temporary_plugin(Two), temporary_plugin(One):
        ps = build_plugin_set({"two": {}, "one": {}})
        seen = []
        undo = ps.add_monitor(lambda c: seen.append(("before", c.plugin)), lambda c: seen.append((c.plugin, c.result)))
        assert ps.call("rlvr_check_dataset", rows=[{}], split="train") == [("two", [(0, "two")]), ("one", None)]
        assert ps.call("rlvr_check_dataset", only=["one"], rows=[{}], split="train") == [("one", None)]
        undo()
        ps.call("rlvr_check_dataset", rows=[{}], split="train")
    assert seen == [
        ("before", "two"),
        ("two", [(0, "two")]),
        ("before", "one"),
        ("one", None),
        ("before", "one"),
        ("one", None),
    ]


@pytest.mark.parametrize("option", ["tryfirst", "trylast", "hookwrapper", "wrapper"])
def test_pluggy_ordering_and_wrapper_options_are_refused(option):
    class Ordered(Plugin):
        name = "ordered"

        @hookimpl(**{option: True})
        def rlvr_on_rewards(self, step):
            yield

    with temporary_plugin(Ordered), pytest.raises(PluginValidationError) as info:
        build_plugin_set({"ordered": {}})
    assert re.fullmatch(
        rf"plugin 'ordered': [\w.<>]*Ordered\.rlvr_on_rewards is declared with {option}=True, "
        r"which rlvr-plugins does not support \(hooks run in the config's plugin order\); remove it",
        str(info.value),
    )


def test_every_hook_has_a_test():
    text = "\n".join(p.read_text(encoding="utf-8") for p in sorted((REPO / "tests").rglob("*.py")))
    missing = [h for h in HOOK_NAMES if not re.search(rf"^def test_hook_{h}\b", text, flags=re.MULTILINE)]
    assert not missing, f"hooks without a test_hook_<name>: {missing}"


def plugin_names() -> set[str]:
    """The plugins under plugins/: entry-point names, distribution names and package names."""
    names = set()
    for pyproject in (REPO / "plugins").glob("*/pyproject.toml"):
        text = pyproject.read_text(encoding="utf-8")
        names.update(re.findall(r'^\s*"?([\w-]+)"?\s*=\s*"rlvr_\w+[.:]', text, flags=re.MULTILINE))  # entry points
        names.update(re.findall(r"^name\s*=\s*\"([\w-]+)\"", text, flags=re.MULTILINE))  # distribution
        names.update(p.name for p in (pyproject.parent / "src").glob("rlvr_*") if (p / "__init__.py").is_file())
    return names


# errors.py: its hint table names the distribution that provides each plugin. testing/__init__.py:
# SFT_TEMPLATES enables r1 plugins by name (the test-helper plugin that replaces it is another branch's).
NAMING_ALLOWED = {"errors.py", "testing/__init__.py"}


def test_the_core_names_no_plugin_of_this_repository():
    """No code under src/rlvr_plugins/ refers to a plugin of plugins/: no import of its package, no
    string that is exactly its name. (Examples in prose, messages and docstrings are not references.)"""
    import io
    import tokenize

    names = plugin_names()
    assert {"qwen-thinking", "rlvr_qwen_thinking", "rlvr-qwen-thinking", "kimi-curriculum", "r1-format"} <= names
    src = REPO / "src" / "rlvr_plugins"
    found = []
    for path in sorted(src.rglob("*.py")):
        where = path.relative_to(src).as_posix()
        if where in NAMING_ALLOWED:
            continue
        for token in tokenize.generate_tokens(io.StringIO(path.read_text(encoding="utf-8")).readline):
            value = token.string
            if token.type == tokenize.STRING and re.fullmatch(
                r"[rbuf]*(['\"])(.*)\1", value, flags=re.DOTALL | re.IGNORECASE
            ):
                value = value.strip("rbufRBUF")[1:-1]
            if (token.type in (tokenize.NAME, tokenize.STRING) and value in names) or (
                token.type == tokenize.NAME and value.split(".")[0] in names
            ):
                found.append(f"{where}:{token.start[0]}: {token.string}")
    assert not found, found


# -- one behaviour test per hook -----------------------------------------------------------


def test_hook_rlvr_register_commands(capsys):
    class Hello(Plugin):
        name = "hello"

        @hookimpl
        def rlvr_register_commands(self, subparsers):
            p = subparsers.add_parser("hello", help="say hello")
            p.add_argument("--name", default="world")
            p.set_defaults(func=lambda args: print(f"hello {args.name}") or 0)

    class Clash(Plugin):
        name = "clash"

        @hookimpl
        def rlvr_register_commands(self, subparsers):
            subparsers.add_parser("train")

    with temporary_plugin(Hello):
        assert cli.main(["hello", "--name", "rlvr"]) == 0
        assert capsys.readouterr().out == "hello rlvr\n"
    with temporary_plugin(Clash):
        assert cli.main(["anything"]) == 2
        assert (
            "rlvr: error: plugin 'clash': rlvr_register_commands: argument command: conflicting subparser: "
            "train" in capsys.readouterr().err
        )


class ShortCompletions(Plugin):
    name = "short-completions"

    @hookimpl
    def rlvr_adjust_grpo_config(self, grpo_kwargs):
        grpo_kwargs["max_completion_length"] = 5


def test_hook_rlvr_adjust_grpo_config(tmp_path, hook_recorder):
    from trl import GRPOConfig

    from rlvr_plugins.train.run import prepare
    from rlvr_plugins.trainer import adjust_grpo_args

    with temporary_plugin(ShortCompletions):
        config = {
            "output_dir": str(tmp_path),
            "plugins": {"short-completions": {}, "r1-accuracy": {}},
            "trainer": {"use_cpu": True},
        }
        prepared = prepare(config)
        assert prepared.grpo_args.max_completion_length == 5
        adjust_grpo_args(prepared.plugin_set, prepared.grpo_args)  # rlvr train's arguments: not adjusted twice
        assert len(hook_recorder.getcalls("rlvr_adjust_grpo_config")) == 1
        ps = build_plugin_set({"short-completions": {}, "r1-accuracy": {}})
        script = GRPOConfig(output_dir=str(tmp_path), use_cpu=True)  # a trainer built in Python gets the same
        adjust_grpo_args(ps, script)
        assert script.max_completion_length == prepared.grpo_args.max_completion_length == 5
        with pytest.raises(
            PluginError,
            match=r"plugin 'short-completions' requires GRPOConfig "
            r"max_completion_length=5, but the GRPOConfig given has "
            r"max_completion_length=7",
        ):
            adjust_grpo_args(ps, GRPOConfig(output_dir=str(tmp_path), use_cpu=True, max_completion_length=7))


def test_hook_rlvr_reward_functions(hook_recorder):
    class Constant(Plugin):
        name = "constant"

        @hookimpl
        def rlvr_reward_functions(self, register):
            register(RewardFunction("one", lambda **kw: 1.0, weight=0.5, isolated=False))

    with temporary_plugin(Constant):
        ps = build_plugin_set({"constant": {}, "r1-accuracy": {}})
        first = ps.reward_functions()
        assert [(owner, r.name, r.weight) for owner, r in first] == [
            ("constant", "one", 0.5),
            ("r1-accuracy", "r1-accuracy", 1.0),
        ]
        assert ps.reward_functions() == first
    assert [c.plugin for c in hook_recorder.getcalls("rlvr_reward_functions")] == ["constant", "r1-accuracy"]


class _Room:
    def reset(self, **row):
        return None


class _Hall(_Room):
    pass


def test_hook_rlvr_environments(hook_recorder):
    def plugin(name: str, *environments):
        class Registers(Plugin):
            @hookimpl
            def rlvr_environments(self, register):
                for environment in environments:
                    register(environment)

        Registers.name = name
        return Registers

    room, hall = Environment("room", _Room), Environment("hall", _Hall)
    with temporary_plugin(plugin("rooms", room)), temporary_plugin(plugin("halls", hall)):
        ps = build_plugin_set({"rooms": {}, "halls": {}, "r1-accuracy": {}})
        assert ps.environments() == [("rooms", room), ("halls", hall)]
        assert ps.environment_factory() == {"room": _Room, "hall": _Hall}
        assert ps.environments() == [("rooms", room), ("halls", hall)]  # collected once
        assert build_plugin_set({"rooms": {}}).environment_factory() is _Room  # one: TRL's single factory
        assert build_plugin_set({"r1-accuracy": {}}).environment_factory() is None
    assert [c.plugin for c in hook_recorder.getcalls("rlvr_environments")] == ["rooms", "halls", "rooms"]
    with temporary_plugin(plugin("a", room)), temporary_plugin(plugin("b", Environment("room", _Hall))):
        with pytest.raises(
            PluginConflictError, match="environment name 'room' is registered by plugin 'a' and by plugin 'b'"
        ):
            build_plugin_set({"a": {}, "b": {}}).environments()
    with temporary_plugin(plugin("wrong", _Room)):
        with pytest.raises(PluginValidationError, match="register\\(\\) takes an rlvr_plugins.Environment"):
            build_plugin_set({"wrong": {}}).environments()
    with pytest.raises(TypeError, match="factory must be callable"):
        Environment("x", "not callable")  # type: ignore[arg-type]


def test_hook_rlvr_validate_run(tmp_path, hook_recorder):
    from rlvr_plugins.train.run import prepare

    class NeedsFormat(Plugin):
        name = "needs-format"

        @hookimpl
        def rlvr_validate_run(self, reward_names, engine_timeout_s, multi_turn):
            if "r1-format" not in reward_names:
                raise ConfigError(f"needs-format: enable r1-format (deadline {engine_timeout_s}, {multi_turn})")

    with temporary_plugin(NeedsFormat):
        config = {"output_dir": str(tmp_path), "trainer": {"use_cpu": True}}
        with pytest.raises(ConfigError, match=r"enable r1-format \(deadline 10.0, False\)"):
            prepare({**config, "plugins": {"needs-format": {}, "r1-accuracy": {}}})
        with pytest.raises(ConfigError, match=r"enable r1-format \(deadline 10.0, True\)"):  # an environment
            prepare({**config, "plugins": {"needs-format": {}, "r1-accuracy": {}, "calculator": {}}})
        prepared = prepare({**config, "plugins": {"needs-format": {}, "r1-format": {}}})
        prepared.plugin_set.validate_run(prepared.grpo_args, 10.0)  # the same run: not again
    assert len(hook_recorder.getcalls("rlvr_validate_run")) == 3


class TruncationCost(Plugin):
    """A third-party length shaping that also penalises truncated completions."""

    name = "truncation-cost"

    @hookimpl
    def rlvr_claims(self):
        return ["truncated-completions"]

    @hookimpl
    def rlvr_length_penalty(self, completion_lengths):
        return -(completion_lengths >= 4).float()


def test_hook_rlvr_claims(tmp_path, capsys, hook_recorder):
    from rlvr_plugins.cli import main
    from rlvr_plugins.errors import PluginConflictError

    def validate(plugins):
        build_plugin_set(plugins).validate_run(SimpleNamespace(max_completion_length=64), None)

    with temporary_plugin(TruncationCost):
        with pytest.raises(PluginConflictError) as info:
            validate({"r1-accuracy": {}, "dapo-overlong": {}, "truncation-cost": {}})
        assert str(info.value).startswith(
            "plugins 'dapo-overlong', 'truncation-cost' both claim 'truncated-completions' (rlvr_claims)"
        )
        validate({"r1-accuracy": {}, "truncation-cost": {}})  # alone: fine
        demo = REPO / "configs" / "demo.yaml"
        code = main(
            [
                "train",
                str(demo),
                "--check",
                "--set",
                f"output_dir={tmp_path}",
                "--set",
                "plugins.dapo-overlong={}",
                "--set",
                "plugins.truncation-cost={}",
            ]
        )
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert "plugins 'dapo-overlong', 'truncation-cost' both claim 'truncated-completions'" in err
    # the shipped length rewards by correctness cannot be stacked either
    with pytest.raises(PluginConflictError, match=r"'kimi-length', 'cosine-length' both claim 'length-by-correctness'"):
        validate({"r1-accuracy": {}, "kimi-length": {}, "cosine-length": {"correctness_reward": "r1-accuracy"}})
    validate({"r1-accuracy": {}, "dapo-overlong": {}, "cosine-length": {"correctness_reward": "r1-accuracy"}})

    class BadClaims(Plugin):
        name = "bad-claims"

        @hookimpl
        def rlvr_claims(self):
            return "truncated-completions"

    with temporary_plugin(BadClaims), pytest.raises(PluginValidationError, match=r"plugin 'bad-claims': rlvr_claims"):
        validate({"r1-accuracy": {}, "bad-claims": {}})
    assert len(hook_recorder.getcalls("rlvr_claims")) >= 5


def test_hook_rlvr_check_dataset(caplog):
    from rlvr_plugins.train.data import check_rows

    class OddRows(Plugin):
        name = "odd-rows"

        @hookimpl
        def rlvr_check_dataset(self, rows, split):
            return [(i, f"odd {split} row") for i in range(1, len(rows), 2)]

    with temporary_plugin(OddRows):
        check_rows(build_plugin_set({"odd-rows": {}}), [{"prompt": str(i)} for i in range(4)], "eval", "e.jsonl")
    assert [r.getMessage() for r in caplog.records] == ["odd-rows: e.jsonl: 2 rows: odd eval row: row 1, row 3"]


def test_hook_rlvr_sft_examples(hook_recorder):
    from rlvr_plugins.testing import char_tokenizer
    from rlvr_plugins.train.sft import sft_examples

    class Abstains(Plugin):
        name = "abstains"

        @hookimpl
        def rlvr_sft_examples(self, rows):
            return None

    class Doubles(Plugin):
        name = "doubles"

        @hookimpl
        def rlvr_sft_examples(self, rows, completion_column, seed):
            return [{**r, completion_column: r[completion_column] * 2, "seed": seed} for r in rows]

    class Never(Doubles):
        name = "never"

    rows = [{"prompt": "1+1=", "solution": "2"}, {"prompt": "2+2=", "solution": "4"}]
    with temporary_plugin(Abstains), temporary_plugin(Doubles), temporary_plugin(Never):
        ps = build_plugin_set({"abstains": {}, "doubles": {}, "never": {}})
        out, plugin = sft_examples(ps, rows, "solution", 3, char_tokenizer())
        assert plugin == "doubles"
        assert [(r["prompt"], r["solution"], r["seed"], r["rlvr_index"]) for r in out] == [
            ("1+1=", "22", 3, 0),
            ("2+2=", "44", 3, 1),
        ]
        assert rows[0]["solution"] == "2"  # the plugin got a copy
        assert [c.plugin for c in hook_recorder.getcalls("rlvr_sft_examples")] == ["abstains", "doubles"]
        out, plugin = sft_examples(build_plugin_set({"abstains": {}}), rows, "solution", 3, char_tokenizer())
        assert plugin is None and [r["solution"] for r in out] == ["2", "4"]


@pytest.mark.slow
def test_train_and_sft_build_the_same_sft_rows_on_the_qwen_fusion_recipe(tmp_path, monkeypatch):
    pytest.importorskip("rlvr_qwen_thinking")
    from rlvr_plugins.cli import sft_cmd
    from rlvr_plugins.train import run, sft
    from rlvr_plugins.train.config import load_config

    seen = {}

    def fake_run_sft(model, tokenizer, rows, *args, **kwargs):
        seen.setdefault("rows", []).append([(r["prompt"], r["solution"]) for r in rows])
        raise SystemExit("stop after the rows are built")

    monkeypatch.setattr(sft, "run_sft", fake_run_sft)
    recipe = REPO / "configs" / "cpu" / "qwen3_fusion.yaml"
    for command in (lambda c: run.train(c, overwrite=True), sft_cmd.run_sft_command):
        config = load_config(recipe, [f"output_dir={tmp_path / 'run'}", "engine.in_process=true"])
        with pytest.raises(SystemExit):
            command(config)
    train_rows, sft_rows = seen["rows"]
    assert train_rows == sft_rows and len(train_rows) == config["sft"]["examples"] == 300  # the recipe's SFT examples
    assert any(p.endswith("/no_think<think>\n\n</think>\n\n") and not s.startswith("<think>") for p, s in train_rows)
    assert any(s.startswith("<think>") for _, s in train_rows)


def test_hook_rlvr_render_prompt():
    from rlvr_plugins.train.data import render

    class Backwards(Plugin):
        name = "backwards"

        @hookimpl
        def rlvr_render_prompt(self, example, index, seed, multi_turn):
            return f"{example['prompt'][::-1]}|{index}|{seed}|{multi_turn}"

    with temporary_plugin(Backwards):
        out = render([{"prompt": "1+2="}, {"prompt": "3+4="}], build_plugin_set({"backwards": {}}), None, 9)
        [with_tools] = render([{"prompt": "1+2="}], build_plugin_set({"backwards": {}, "calculator": {}}), None, 9)
    assert [(r["prompt"], r["raw_prompt"], r["rlvr_index"]) for r in out] == [
        ("=2+1|0|9|False", "1+2=", 0),
        ("=4+3|1|9|False", "3+4=", 1),
    ]
    assert with_tools["prompt"] == "=2+1|0|9|True"  # an environment is enabled: TRL's tool loop needs messages


class Wiring(Plugin):
    """The trainer-side hooks: a fixed sampler, a rollout function and a callback."""

    name = "wiring"

    class Callback:  # a TrainerCallback needs no base class beyond the methods it defines
        pass

    @hookimpl
    def rlvr_train_sampler(self, dataset, num_generations, grpo_args):
        self.sampler_args = grpo_args
        return [i for i in range(len(dataset)) for _ in range(num_generations)]

    @hookimpl
    def rlvr_rollout_func(self, num_generations):
        def rollout(prompts, trainer):
            raise AssertionError("not generated in this test")

        self.rollout = rollout
        return rollout

    @hookimpl
    def rlvr_trainer_callbacks(self, trainer):
        self.callback = Wiring.Callback()
        self.trainer = trainer
        return [self.callback]


@pytest.fixture(scope="module")
def wired_trainer(tmp_path_factory):
    from rlvr_plugins.testing import tiny_trainer

    with temporary_plugin(Wiring):
        trainer = tiny_trainer(tmp_path_factory.mktemp("wired"), {"wiring": {}, "r1-accuracy": {}})
    yield trainer
    trainer.engines.close()


def test_hook_rlvr_train_sampler(wired_trainer):
    plugin = wired_trainer.plugin_set.get("wiring")
    assert wired_trainer._get_train_sampler() == [i for i in range(16) for _ in range(4)]
    assert plugin.sampler_args is wired_trainer.args


def test_hook_rlvr_rollout_func(wired_trainer):
    assert wired_trainer.rollout_func is wired_trainer.plugin_set.get("wiring").rollout


class Segments(Plugin):
    """Answers rlvr_rollout_segments with ``Segments.answer``; records the GRPOConfig it was given."""

    name = "segments-probe"
    answer: ClassVar = None
    seen: ClassVar[list] = []

    @hookimpl
    def rlvr_rollout_segments(self, grpo_args):
        Segments.seen.append(grpo_args)
        return Segments.answer


def test_hook_rlvr_rollout_segments(tmp_path):
    from rlvr_plugins.segments import SegmentPlan
    from rlvr_plugins.testing import tiny_trainer

    Segments.seen, Segments.answer = [], SegmentPlan(tokens=3)
    with temporary_plugin(Segments):
        trainer = tiny_trainer(tmp_path / "on", {"segments-probe": {}, "r1-accuracy": {}})
        trainer.engines.close()
        # asked when the run is checked, then by the trainer
        assert Segments.seen == [trainer.args] * 2 and trainer._rlvr_segments.tokens == 3
        assert trainer._rlvr_pool is not None  # partial rollouts run on the pool, with no pool policy enabled
        Segments.answer = None
        trainer = tiny_trainer(tmp_path / "off", {"segments-probe": {}, "r1-accuracy": {}})
        trainer.engines.close()
        assert trainer._rlvr_segments is None and trainer._rlvr_pool is None
        Segments.answer = 3
        with pytest.raises(PluginError, match="plugin 'segments-probe': rlvr_rollout_segments returned int"):
            tiny_trainer(tmp_path / "bad", {"segments-probe": {}, "r1-accuracy": {}})
        Segments.answer = SegmentPlan(tokens=3)
        with temporary_plugin(Wiring), pytest.raises(PluginError, match="cannot run with a rollout_func"):
            tiny_trainer(tmp_path / "refused", {"segments-probe": {}, "wiring": {}, "r1-accuracy": {}})


def test_hook_rlvr_trainer_callbacks(wired_trainer):
    plugin = wired_trainer.plugin_set.get("wiring")
    assert plugin.trainer is wired_trainer
    assert wired_trainer.callback_handler.callbacks[-1] is plugin.callback


def penalised(plugins: dict):
    from rlvr_plugins.advantages import batch_advantages

    return batch_advantages(
        build_plugin_set(plugins),
        rewards_per_func=torch.tensor([[1.0], [0.0], [1.0], [1.0]]),
        weights=torch.ones(1),
        failed=torch.zeros(4, 1, dtype=torch.bool),
        lengths=torch.tensor([2, 4, 6, 8]),
        num_generations=2,
        step=0,
        names=["r"],
    )


class LengthCost(Plugin):
    name = "length-cost"

    @hookimpl
    def rlvr_length_penalty(self, completion_lengths):
        return -0.1 * completion_lengths.float()


def test_hook_rlvr_length_penalty():
    with temporary_plugin(LengthCost):
        out = penalised({"length-cost": {}, "mean-baseline": {}})
    # mean-baseline: r - mean(group) -> [0.5, -0.5, 0, 0]; penalty centred per group: [0.1, -0.1, 0.1, -0.1]
    assert out.advantages.tolist() == pytest.approx([0.6, -0.6, 0.1, -0.1])
    assert [name for name, _ in out.penalties] == ["length-cost"]


def test_hook_rlvr_compute_advantages():
    class Doubled(Plugin):
        name = "doubled"

        @hookimpl
        def rlvr_compute_advantages(self, rewards, num_generations):
            return 2 * (rewards - rewards.view(-1, num_generations).mean(1).repeat_interleave(num_generations))

    with temporary_plugin(Doubled):
        out = penalised({"doubled": {}})
    assert out.advantages.tolist() == pytest.approx([1.0, -1.0, 0.0, 0.0])
    assert out.zero_variance.tolist() == [False, True]


class LengthWeighted(Plugin):
    """OPO's baseline, ``A_i = r_i - sum_j |o_j| r_j / sum_j |o_j|`` per group; records what it receives."""

    name = "length-weighted"
    seen: ClassVar[list] = []

    @hookimpl
    def rlvr_compute_advantages(self, rewards, num_generations, completion_lengths):
        LengthWeighted.seen.append((rewards.clone(), completion_lengths.clone()))
        w = completion_lengths.double().view(-1, num_generations)
        r = rewards.double().view(-1, num_generations)
        return (r - (w * r).sum(1, keepdim=True) / w.sum(1, keepdim=True)).view(-1).to(rewards.dtype)


def opo_by_hand(rewards: list[float], lengths: list[int], group: int) -> list[float]:
    out = []
    for g in range(0, len(rewards), group):
        r, n = rewards[g : g + group], lengths[g : g + group]
        baseline = sum(a * b for a, b in zip(r, n)) / sum(n)
        out += [x - baseline for x in r]
    return out


def test_hook_rlvr_compute_advantages_receives_completion_lengths_opt_in():
    LengthWeighted.seen = []
    with temporary_plugin(LengthWeighted):
        out = penalised({"length-weighted": {}})
    ((rewards, lengths),) = LengthWeighted.seen
    assert lengths.tolist() == [2, 4, 6, 8]  # what rlvr_length_penalty gets (penalised's lengths)
    assert rewards.tolist() == [1.0, 0.0, 1.0, 1.0]
    # OPO by hand, group 1: baseline (2*1 + 4*0) / 6 = 1/3; group 2 all equal -> exactly 0
    assert out.advantages.tolist() == pytest.approx([2 / 3, -1 / 3, 0.0, 0.0])
    assert penalised({}).advantages.tolist() == pytest.approx([0.7071, -0.7071, 0.0, 0.0], abs=1e-4)  # grpo: unchanged


def test_rlvr_audit_passes_its_answers_lengths_to_an_estimator_taking_them():
    import numpy as np

    from rlvr_plugins.lab import audit

    LengthWeighted.seen = []
    size = audit.AuditSize(prompts=2, generations=4, draws=3)
    problem = audit.length_problem(size.prompts, size.short, size.long)
    with temporary_plugin(LengthWeighted):
        (estimator,) = audit.load_estimators(["length-weighted"])
        LengthWeighted.seen = []
        ((answers, advantages),) = list(audit.iter_draws(estimator, problem, size, 0, stacked=True))
    ((rewards, lengths),) = LengthWeighted.seen
    # answers 0 and 2 are short (64 tokens), 1 and 3 long (512): length_problem's layout
    expected_lengths = np.where(answers % 2 == 0, 64, 512).reshape(-1)
    assert lengths.tolist() == expected_lengths.tolist()
    expected = opo_by_hand(rewards.tolist(), expected_lengths.tolist(), 4)
    raw = torch.tensor(expected).view(-1, 4)
    flat_rewards = rewards.view(-1, 4)
    equal = (flat_rewards.max(1).values == flat_rewards.min(1).values).unsqueeze(1)
    assert advantages.reshape(-1).tolist() == pytest.approx(torch.where(equal, 0.0, raw).view(-1).tolist(), abs=1e-6)
    assert audit.answer_lengths((1, 3)).tolist() == [[32, 64, 96]]  # problems without lengths of their own


@pytest.mark.slow
def test_the_trainer_passes_each_completions_token_count(tmp_path):
    """A TRL reward function and an estimator taking ``completion_lengths``: it receives the number of tokens of
    each completion (TRL's completion mask summed), and its advantages reach the loss."""
    from rlvr_plugins.testing import char_tokenizer, grpo_args, tiny_model, tiny_rows
    from rlvr_plugins.trainer import RLVRTrainer

    def digit_count(completions, **kwargs):
        return [float(sum(ch.isdigit() for ch in c)) for c in completions]

    LengthWeighted.seen = []
    tok = char_tokenizer()
    with temporary_plugin(LengthWeighted):
        trainer = RLVRTrainer(
            tiny_model(tok),
            reward_funcs=[digit_count],
            args=grpo_args(tmp_path, max_steps=1),
            train_dataset=__import__("datasets").Dataset.from_list(tiny_rows()),
            processing_class=tok,
            plugins={"length-weighted": {}},
        )
    outputs = []
    original = trainer._generate_and_score_completions
    trainer._generate_and_score_completions = lambda inputs: outputs.append(original(inputs)) or outputs[-1]
    trainer.train()
    ((rewards, lengths),) = LengthWeighted.seen
    (output,) = outputs
    assert lengths.tolist() == output["completion_mask"].sum(1).tolist()
    texts = tok.batch_decode(output["completion_ids"], skip_special_tokens=True)
    assert rewards.tolist() == digit_count(texts)
    expected = opo_by_hand(rewards.tolist(), lengths.tolist(), 4)
    equal = [len(set(rewards.tolist()[g : g + 4])) == 1 for g in range(0, 8, 4) for _ in range(4)]
    assert output["advantages"].tolist() == pytest.approx([0.0 if e else x for e, x in zip(equal, expected)], abs=1e-5)


@pytest.mark.slow
def test_hook_rlvr_on_rewards(one_step_run):
    run, recorder = one_step_run
    call = recorder.getcall("rlvr_on_rewards")
    assert call.plugin == "probe" and len(call.kwargs["example_indices"]) == 4
    step = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if '"probe/rows"' in line]
    assert [row["probe/rows"] for row in step] == [4.0]


class NewestGroups(Plugin):
    """docs/hooks.md's example policy: two rounds per step, train on the newest groups; records its calls."""

    name = "newest-groups"
    calls: ClassVar[list] = []

    @hookimpl
    def rlvr_select_groups(self, groups, needed, round, step):
        from rlvr_plugins.rollout_pool import GroupSelection

        NewestGroups.calls.append((round, step, needed, [g.id for g in groups], [g.age for g in groups]))
        if round == 0:
            return GroupSelection(more=True)
        return GroupSelection(train=tuple(g.id for g in sorted(groups, key=lambda g: -g.id)[:needed]))

    @hookimpl
    def rlvr_on_rewards(self, example_indices):
        NewestGroups.calls.append(("observed", example_indices[:: len(example_indices) // 2]))


def trained_two_steps(tmp_path, tokenizer, plugins: dict):
    """An ``RLVRTrainer`` on a tiny model and 16 demo rows, trained for two steps with ``plugins``."""
    from datasets import Dataset

    from rlvr_plugins.rewards import Engines
    from rlvr_plugins.testing import grpo_args, tiny_model, tiny_rows
    from rlvr_plugins.trainer import RLVRTrainer

    trainer = RLVRTrainer(
        plugin_set=build_plugin_set(plugins),
        engines=Engines(in_process=True),
        model=tiny_model(tokenizer),
        args=grpo_args(tmp_path, max_steps=2),
        train_dataset=Dataset.from_list(tiny_rows()),
        processing_class=tokenizer,
    )
    trainer.train()
    return trainer


@pytest.mark.slow
def test_hook_rlvr_select_groups(tmp_path, tokenizer, reward_plugin):
    from rlvr_plugins.rollout_pool import extra_prompts
    from rlvr_plugins.testing import digit_share

    reward_plugin("digits", digit_share, isolated=False)
    NewestGroups.calls = []
    with temporary_plugin(NewestGroups):
        trainer = trained_two_steps(tmp_path, tokenizer, {"digits": {}, "newest-groups": {}})
    selects = [c for c in NewestGroups.calls if c[0] != "observed"]
    # per step: round 0 sees its 2 groups, round 1 the 4 (nothing waits: the others were dropped)
    assert selects == [(0, 0, 2, [0, 1], [0, 0]), (1, 0, 2, [0, 1, 2, 3], [0] * 4)] + [
        (0, 1, 2, [4, 5], [0, 0]),
        (1, 1, 2, [4, 5, 6, 7], [0] * 4),
    ]
    observed = [c[1] for c in NewestGroups.calls if c[0] == "observed"]
    assert len(observed) == 4 and observed[1] == extra_prompts(7, 0, 1, 16, 2)  # round 1: the seeded draw
    for key, values in (("pool/rounds", [2.0, 2.0]), ("pool/discarded", [2.0, 2.0]), ("pool/groups_kept", [2.0] * 2)):
        assert [h[key] for h in trainer.state.log_history if key in h] == values


class ReversedSampler(Plugin):
    """TRL's sampler, and for the pool's rounds the prompts in reverse order; records what it was asked."""

    name = "reversed-sampler"
    calls: ClassVar[list] = []

    @hookimpl
    def rlvr_train_sampler(self, dataset, num_generations, prompts_per_batch, repeat_count, seed):
        from trl.trainer.utils import RepeatSampler

        return RepeatSampler(dataset, num_generations, prompts_per_batch, repeat_count, seed=seed)

    @hookimpl
    def rlvr_pool_prompts(self, num_prompts, step, round, seed):
        ReversedSampler.calls.append((num_prompts, step, round, seed))
        return list(range(num_prompts))[::-1]


@pytest.mark.slow
def test_hook_rlvr_pool_prompts(tmp_path, tokenizer, reward_plugin):
    from rlvr_plugins.testing import digit_share

    reward_plugin("digits", digit_share, isolated=False)
    NewestGroups.calls, ReversedSampler.calls = [], []
    with temporary_plugin(NewestGroups), temporary_plugin(ReversedSampler):
        trained_two_steps(tmp_path, tokenizer, {"digits": {}, "newest-groups": {}, "reversed-sampler": {}})
    assert ReversedSampler.calls == [(16, 0, 1, 7), (16, 1, 1, 7)]  # once per extra round, before it generates
    observed = [c[1] for c in NewestGroups.calls if c[0] == "observed"]
    assert observed[1] == observed[3] == [15, 14]  # each extra round: the head of the sampler's order


class SkipEven(Plugin):
    """Skips every even prompt before generating; records what it was asked."""

    name = "skip-even"
    calls: ClassVar[list] = []

    @hookimpl
    def rlvr_skip_prompts(self, prompts, history, step, round):
        SkipEven.calls.append((step, round, len(prompts), dict(history)))
        return [p for p in prompts if p % 2 == 0]


@pytest.mark.slow
def test_hook_rlvr_skip_prompts(tmp_path, tokenizer, reward_plugin):
    from rlvr_plugins.testing import digit_share

    reward_plugin("digits", digit_share, isolated=False)
    NewestGroups.calls, SkipEven.calls = [], []
    with temporary_plugin(NewestGroups), temporary_plugin(SkipEven):
        trainer = trained_two_steps(tmp_path, tokenizer, {"digits": {}, "newest-groups": {}, "skip-even": {}})
    # once per round, before it generates: the round's 2 prompts, then the 14 others as candidates
    assert [c[:3] for c in SkipEven.calls] == [(0, 0, 16), (0, 1, 16), (1, 0, 16), (1, 1, 16)]
    assert SkipEven.calls[0][3] == {} and len(SkipEven.calls[1][3]) == 2  # the record of round 0's prompts
    observed = [c[1] for c in NewestGroups.calls if c[0] == "observed"]
    assert len(observed) == 4 and all(i % 2 == 1 for prompts in observed for i in prompts)
    skipped = [h["pool/skipped_prompts"] for h in trainer.state.log_history if "pool/skipped_prompts" in h]
    assert len(skipped) == 2 and sum(skipped) > 0


class StartedLog(Plugin):
    """Records the groups each round starts and those it scores, in the order they come."""

    name = "started-log"
    calls: ClassVar[list] = []

    drawn: ClassVar[list] = []

    @hookimpl
    def rlvr_pool_started(self, prompts, drawn, step, round):
        StartedLog.calls.append(("started", step, round, list(prompts)))
        StartedLog.drawn.append(list(drawn))

    @hookimpl
    def rlvr_on_rewards(self, example_indices, num_generations, step, round):
        StartedLog.calls.append(("scored", step, round, example_indices[::num_generations]))


@pytest.mark.slow
def test_hook_rlvr_pool_started(tmp_path, tokenizer, reward_plugin):
    from rlvr_plugins.testing import digit_share

    reward_plugin("digits", digit_share, isolated=False)
    NewestGroups.calls, SkipEven.calls, StartedLog.calls, StartedLog.drawn = [], [], [], []
    with temporary_plugin(NewestGroups), temporary_plugin(SkipEven), temporary_plugin(StartedLog):
        trained_two_steps(tmp_path, tokenizer, {"digits": {}, "newest-groups": {}, "skip-even": {}, "started-log": {}})
    # once per round, before it generates, naming exactly the groups the round then scores (no partial rollouts)
    kinds = [(kind, step, round) for kind, step, round, _ in StartedLog.calls]
    assert kinds == [(k, step, r) for step in (0, 1) for r in (0, 1) for k in ("started", "scored")]
    for started, scored in zip(StartedLog.calls[::2], StartedLog.calls[1::2]):
        assert started[3] == scored[3] and len(started[3]) == 2 and all(i % 2 == 1 for i in started[3])
    # drawn: at round 0 the sampler's own batch, before skip-even replaced its even prompts; [] later
    assert [len(d) for d in StartedLog.drawn] == [2, 0, 2, 0]
    assert any(i % 2 == 0 for d in StartedLog.drawn for i in d)


@pytest.mark.slow
def test_hook_rlvr_state_dict(one_step_run):
    from rlvr_plugins.checkpoints import PLUGIN_STATE_FILE

    run, _ = one_step_run
    state = json.loads((run / "checkpoint-1" / PLUGIN_STATE_FILE).read_text())
    assert state == {"probe": {"batches": 1}}


def test_hook_rlvr_load_state_dict(tmp_path, hook_recorder):
    from rlvr_plugins.checkpoints import PLUGIN_STATE_FILE
    from rlvr_plugins.trainer import RLVRTrainer

    class Counter(Probe):
        name = "counter"

        @hookimpl
        def rlvr_load_state_dict(self, state):
            Probe.seen["counter"] = state

    (tmp_path / PLUGIN_STATE_FILE).write_text(json.dumps({"probe": {"batches": 3}}))
    Probe.seen = {}
    with temporary_plugin(Probe), temporary_plugin(Counter):
        ps = build_plugin_set({"probe": {}, "counter": {}})
        RLVRTrainer._load_plugin_state(
            SimpleNamespace(plugin_set=ps, _rlvr_pool=None, _rlvr_continuations=None), str(tmp_path)
        )
    assert Probe.seen == {"loaded": {"batches": 3}}  # counter saved no state: not called
    assert [c.plugin for c in hook_recorder.getcalls("rlvr_load_state_dict")] == ["probe"]


def test_the_hookspecs_module_lists_the_hooks_tested_here():
    assert set(HOOK_NAMES) == {n for n in vars(hookspecs) if n.startswith("rlvr_")}
