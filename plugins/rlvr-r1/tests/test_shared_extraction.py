"""maj@k (rlvr_plugins.lab.metrics) votes on the answer r1-accuracy reads: the two extractions agree."""

from hypothesis import given, settings
from hypothesis import strategies as st

from rlvr_plugins.lab.metrics import extract_final_answer
from rlvr_r1.answers import extract_answer

PIECES = [
    "<think>",
    "</think>",
    "<THINK>",
    "</Think>",
    "<answer>",
    "</answer>",
    "<ANSWER>",
    r"\boxed{",
    r"\fbox {",
    "{",
    "}",
    r"\{",
    "####",
    "#### ",
    "$",
    r"\$",
    "1,234",
    "-3.5",
    ".5",
    "7",
    " ",
    "\n",
    "x",
    "so",
]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=14))
def test_maj_at_k_and_r1_accuracy_extract_the_same_answer(pieces):
    completion = "".join(pieces)
    assert extract_final_answer(completion) == extract_answer(completion)


def test_the_cases_where_the_old_copies_disagreed():
    for completion, expected in [
        ("<think>unclosed #### 5", None),  # unfinished thinking: no answer
        (r"<think>a</think>\boxed{1}<think>\boxed{2}", "1"),  # a re-opened <think> ends the answer
        ("<answer>1</answer><answer>2</answer>", None),  # ambiguous: two answer blocks
        (r"<answer> </answer>\boxed{3}", None),  # an empty block decides
        ("#### 4\n#### none", None),  # only the last ####
    ]:
        assert extract_final_answer(completion) == expected == extract_answer(completion)
