"""The r1-accuracy reward through the reward engine's worker processes, on hostile text."""

from rlvr_plugins.manager import build_plugin_set
from rlvr_plugins.rewards import Engines, score_items

CASES = [
    ("<think>t</think><answer>\\boxed{１２}</answer>", "12", 1.0),
    ("<think>t</think><answer>\\boxed{٣}</answer>", "3", 1.0),
    ("<think>t</think><answer>\\boxed{۳}</answer>", "4", 0.0),
    ("<think>t</think><answer>\\boxed{−5}</answer>", "-5", 1.0),
    ("<think>首先计算 3 + 4 = 7。</think>答案是 \\boxed{7}", "7", 1.0),
    ("<think>a\x00b</think><answer>\\boxed{12}\x00</answer>", "12", 1.0),
    ("<think>t</think>\x1b[31m\\boxed{12}\x1b[0m", "12", 1.0),
    ("<think>\ud800</think><answer>\\boxed{12}</answer>", "12", 1.0),
    ("<think>t</think><answer>\\boxed{12\udfff}</answer>", "12", None),
    ("<think>t</think><answer>\x1b[2J\ud83d\x00</answer>", "12", None),
]


def test_accuracy_in_worker_processes_gives_verdicts_on_hostile_text():
    reward = build_plugin_set({"r1-accuracy": {}}).reward_functions()[0][1]
    items = score_items(["q"] * len(CASES), [c for c, _, _ in CASES], [{"answer": r} for _, r, _ in CASES])
    engines = Engines(num_workers=2, timeout_s=60.0)
    try:
        result = engines.score(reward, items)
    finally:
        engines.close()
    assert result.failed == [False] * len(CASES), result.errors
    for value, (_, _, expected) in zip(result.values, CASES):
        assert value in (0.0, 1.0)
        if expected is not None:
            assert value == expected
