"""Each R1 reward offers an example item (``rlvr train --check`` scores it once): it scores 1 on it."""

import pytest

from rlvr_plugins.manager import build_plugin_set
from rlvr_plugins.rewards import Engines


@pytest.mark.parametrize("options", [{}, {"think_opened": True}])
def test_accuracy_and_format_score_their_own_example_1(options):
    plugins = build_plugin_set({"r1-accuracy": dict(options), "r1-format": dict(options)})
    engines = Engines(in_process=True)
    try:
        for _, reward in plugins.reward_functions():
            assert reward.example is not None, reward.name
            assert engines.score(reward, [reward.example]).values == [1.0], reward.name
    finally:
        engines.close()
    if options:
        assert reward.example["completion"] == "1+1=2</think><answer>2</answer>"


def test_the_accuracy_example_uses_the_answer_column():
    [(_, reward)] = build_plugin_set({"r1-accuracy": {"answer_column": "gold"}}).reward_functions()
    assert reward.example["example"] == {"gold": "2"}
