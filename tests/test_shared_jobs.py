"""One function per shared job (issue 20): scoring every reward, the run header, the main-process rule,
atomic writes, reading a run's JSON, the SFT length budget. Values are worked out by hand."""

import math

import pytest

from rlvr_plugins import RewardFunction
from rlvr_plugins.errors import RunFolderError
from rlvr_plugins.rewards import Engines, example_of, score_all


def length(*, prompt, completion, example):
    return float(len(completion))


def picky(*, prompt, completion, example):
    if example["kind"] == "skip":
        return None  # does not apply: NaN, not failed
    if example["kind"] == "boom":
        raise ValueError("boom")  # failed: NaN, counted
    return 1.0 if completion == example["answer"] else 0.0


def seen(*, prompt, completion, example):
    return float(sorted(example) == ["answer", "group", "kind"]) + (10.0 if isinstance(completion, list) else 0.0)


def test_score_all_is_one_table_of_every_reward():
    rows = [
        {"prompt": "p0", "answer": "4", "kind": "ok", "group": 0},
        {"prompt": "p1", "answer": "5", "kind": "skip", "group": 0},
        {"prompt": "p2", "answer": "6", "kind": "boom", "group": 1},
    ]
    rewards = [
        ("a", RewardFunction("length", length, isolated=False)),
        ("b", RewardFunction("picky", picky, isolated=False)),
        ("c", RewardFunction("seen", seen, isolated=False, completion_format="messages")),
    ]
    completions = ["4", "five", [{"role": "assistant", "content": "6"}]]
    engines = Engines(in_process=True)
    try:
        table = score_all(rewards, engines, [r["prompt"] for r in rows], completions, rows)
        assert table.names == ["length", "picky", "seen"]
        assert tuple(table.values.shape) == (3, 3) == tuple(table.failed.shape)
        # length: "4" -> 1, "five" -> 4, the chat completion as text ("6") -> 1
        assert table.column("length") == [1.0, 4.0, 1.0]
        picky_values = table.column("picky")
        assert picky_values[0] == 1.0 and math.isnan(picky_values[1]) and math.isnan(picky_values[2])
        # the example holds every column but prompt and completion; a "messages" reward gets the list
        assert table.column("seen") == [1.0, 1.0, 11.0]
        assert table.failed.tolist() == [[False, False, False], [False, False, False], [False, True, False]]
        assert engines.failures() == {
            "length": {"items": 3, "failed": 0},
            "picky": {"items": 3, "failed": 1},
            "seen": {"items": 3, "failed": 0},
        }
    finally:
        engines.close()


def test_example_of_drops_only_the_item_columns():
    assert example_of({"prompt": "p", "completion": "c", "answer": 1, "group": 2}) == {"answer": 1, "group": 2}


def test_run_header_and_versions():
    from rlvr_plugins.manager import build_plugin_set
    from rlvr_plugins.train.runfolder import VERSIONED, run_header, versions

    got = versions()
    assert list(got) == list(VERSIONED)
    assert all(isinstance(v, str) and v for v in got.values())
    plugin_set = build_plugin_set({"r1-accuracy": {}, "r1-format": {"weight": 0.5}})
    header = run_header(plugin_set)
    assert list(header) == ["plugins", "rewards", "versions"]
    assert header["rewards"] == [
        {"plugin": "r1-accuracy", "name": "r1-accuracy", "weight": 1.0, "isolated": True},
        {"plugin": "r1-format", "name": "r1-format", "weight": 0.5, "isolated": True},
    ]
    assert header["plugins"] == plugin_set.describe()


@pytest.mark.parametrize("rank, expected", [(None, True), ("0", True), ("1", False), ("3", False)])
def test_is_main_process_reads_rank(monkeypatch, rank, expected):
    from rlvr_plugins.outputs import is_main_process

    if rank is None:
        monkeypatch.delenv("RANK", raising=False)
    else:
        monkeypatch.setenv("RANK", rank)
    assert is_main_process() is expected


def test_read_json(tmp_path):
    from rlvr_plugins.train.runfolder import read_json

    assert read_json(tmp_path / "absent.json") is None
    (tmp_path / "ok.json").write_text('{"a": 1}', encoding="utf-8")
    assert read_json(tmp_path / "ok.json") == {"a": 1}
    (tmp_path / "torn.json").write_text('{"a": ', encoding="utf-8")
    with pytest.raises(RunFolderError, match=r"torn.json: not valid JSON \(Expecting value at line 1\)"):
        read_json(tmp_path / "torn.json")
    (tmp_path / "list.json").write_text("[1]", encoding="utf-8")
    with pytest.raises(RunFolderError, match="list.json: expected a JSON object"):
        read_json(tmp_path / "list.json")


def test_truncate_metrics_writes_atomically_and_leaves_no_temporary(tmp_path):
    from rlvr_plugins.train.runfolder import truncate_metrics

    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 1}\n{"step": 2}\n{"step": 3}\n{"step": ', encoding="utf-8")
    truncate_metrics(path, 2)
    assert path.read_text(encoding="utf-8") == '{"step": 1}\n{"step": 2}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["metrics.jsonl"]


def test_write_errno_sees_through_write_atomic():
    """A full disk under outputs.write_atomic still becomes the run folder's disk-full message."""
    import errno

    from rlvr_plugins.checkpoints import write_errno
    from rlvr_plugins.outputs import OutputError

    try:
        try:
            raise OSError(errno.ENOSPC, "No space left on device")
        except OSError as exc:
            raise OutputError("summary could not be written") from exc
    except OutputError as wrapped:
        assert write_errno(wrapped) == errno.ENOSPC


class CharTokenizer:
    """One token per character, plus one for BOS; the chat template is ``<role>content`` per message."""

    def __call__(self, text):
        return {"input_ids": [0] + [ord(c) for c in text]}

    def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=False):
        assert not tokenize
        text = "".join(f"<{m['role']}>{m['content']}" for m in messages)
        return text + ("<assistant>" if add_generation_prompt else "")


def test_sft_length_budget_counts_chat_rows():
    from rlvr_plugins.train.sft import longest_prompt

    chat = {"prompt": [{"role": "user", "content": "what is 12+30?"}]}  # "<user>what is 12+30?<assistant>": 31
    plain = {"prompt": "2+2="}  # 4 characters
    tok = CharTokenizer()
    assert longest_prompt([plain], tok) == 1 + 4
    assert longest_prompt([plain, chat], tok) == 1 + 6 + 14 + 11
    assert longest_prompt([chat], tok) == 32  # chat rows only: was max() of nothing (ValueError)
