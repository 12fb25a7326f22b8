"""The code-tests scorer end to end through the sandbox, its options, and the engine's deadline."""

from __future__ import annotations

import glob
import os
import secrets
import tempfile
import time

import pytest
from code_helpers import host_can_fork, survivors

from rlvr_code.plugins import CodeTestsOptions, CodeTestsPlugin, CodeTestsScorer
from rlvr_code.sandbox import Limits, namespaces_available, remove_stale_dirs
from rlvr_plugins.errors import PluginOptionError

FENCE = "```"
ADD = [{"input": "1 2\n", "output": "3\n"}, {"input": "5 7\n", "output": "12\n"}, {"input": "0 0\n", "output": "0\n"}]


def answer(code):
    return f"<think>I will add.</think>\n{FENCE}python\n{code}\n{FENCE}"


def scorer(**options):
    plugin = CodeTestsPlugin(CodeTestsPlugin.parse_options(options))
    return plugin.scorer()


def score(s, code, example):
    return s(prompt="p", completion=answer(code), example=example)


@pytest.fixture(scope="module")
def share():
    return scorer(mode="share", time_limit_s=5.0, total_time_s=20.0)


@pytest.fixture(scope="module")
def all_():
    return scorer(time_limit_s=5.0, total_time_s=20.0)


CORRECT = "a, b = map(int, input().split())\nprint(a + b)"
PARTIAL = "a, b = map(int, input().split())\nprint(a + b if a < 5 else a * b)"


def test_correct_wrong_and_partial_programs(share, all_):
    tests = {"tests": ADD}
    assert score(share, CORRECT, tests) == 1.0 and score(all_, CORRECT, tests) == 1.0
    assert score(share, "print(42)", tests) == 0.0
    assert score(share, PARTIAL, tests) == pytest.approx(2 / 3) and score(all_, PARTIAL, tests) == 0.0


def test_json_string_tests_and_trailing_whitespace(share):
    tests = {"tests": '[{"input": "2 2", "output": "4  \\n\\n"}]'}
    assert score(share, CORRECT, tests) == 1.0


def test_printing_only_the_first_expected_line_fails(share):
    tests = {"tests": [{"input": "", "output": "1\n2\n3\n"}]}
    assert score(share, "print(1)", tests) == 0.0
    assert score(share, "print(1); print(2); print(3)", tests) == 1.0


@pytest.mark.parametrize(
    "code, expected",
    [
        ("raise ValueError('boom')", 0.0),
        ("import sys; sys.exit(3)", 0.0),
        ("import os; os._exit(0)", 1.0),  # status 0 as the kernel reports it: nothing printed, nothing expected
        ("import os; os._exit(3)", 0.0),
        ("import ctypes; ctypes.string_at(0)", 0.0),  # segmentation fault
        ("import sys; sys.exit(0)", 1.0),
        ("exit()", 1.0),  # exit/quit come from the site module, which -S skips: the harness adds them
        ("quit(2)", 0.0),
        ("pass", 1.0),
    ],
)
def test_empty_expected_output_needs_exit_status_0(share, code, expected):
    assert score(share, code, {"tests": [{"input": "", "output": ""}]}) == expected


def test_a_program_that_is_not_valid_utf8_fails_instead_of_raising(share):
    assert score(share, "print('\ud800')", {"tests": [{"input": "", "output": "?"}]}) == 0.0


def test_output_after_the_program_ends_in_threads_counts(share):
    code = "import threading\ndef main():\n    print(sum(map(int, input().split())))\nthreading.Thread(target=main).start()"
    assert score(share, code, {"tests": ADD}) == 1.0


def test_assert_style_tests(all_):
    humaneval = {
        "test": "def check(candidate):\n    assert candidate(3) == 9\n    assert candidate(-2) == 4\n",
        "entry_point": "square",
        "tests": None,
    }
    assert score(all_, "def square(x):\n    return x * x", humaneval) == 1.0
    assert score(all_, "def square(x):\n    return 9", humaneval) == 0.0
    assert score(all_, "import sys\nsys.exit(0)\ndef square(x):\n    return 0", humaneval) == 0.0
    assert score(all_, "import os\nos._exit(0)", humaneval) == 0.0
    assert score(all_, "exit(0)", humaneval) == 0.0
    assert score(all_, "def square(x):\n    raise SystemExit(0)", humaneval) == 0.0
    assert score(all_, "print('xx')\ndef square(x):\n    return x * x", humaneval) == 1.0
    mbpp = {"test_list": None, "test": ["assert add(1, 2) == 3", "assert add(2, 2) == 4"]}
    assert score(all_, "def add(a, b):\n    return a + b", mbpp) == 1.0
    assert score(all_, "def add(a, b):\n    return 3", mbpp) == 0.0


def test_assert_tests_see_the_programs_exceptions_and_plain_values_only(all_):
    expects_error = {
        "test": "def check(c):\n    try:\n        c(-1)\n    except ValueError:\n        pass\n"
        "    else:\n        raise AssertionError('no error')\n    assert c(4) == 2.0\n",
        "entry_point": "root",
    }
    assert (
        score(all_, "def root(x):\n    if x < 0:\n        raise ValueError(x)\n    return x ** 0.5", expects_error)
        == 1.0
    )
    assert score(all_, "def root(x):\n    return abs(x) ** 0.5", expects_error) == 0.0
    kinds = {
        "test": [
            "assert kinds() == [None, True, 2, 2.5, 'x', b'y', 1j, (1,), {1}, frozenset(), {'k': [1]}]",
            "assert type(kinds()[1]) is bool and type(kinds()[2]) is int",
        ]
    }
    assert (
        score(
            all_,
            "def kinds():\n    return [None, True, 2, 2.5, 'x', b'y', 1j, (1,), {1}, frozenset(), {'k': [1]}]",
            kinds,
        )
        == 1.0
    )
    named = {"test": ["assert pair() == (1, 2)", "assert counts() == {'a': 2}", "assert big() == 10 ** 5000"]}
    assert (
        score(
            all_,
            "import collections\ndef pair():\n    return collections.namedtuple('P', 'x y')(1, 2)\n"
            "def counts():\n    return collections.Counter('aa')\ndef big():\n    return 10 ** 5000",
            named,
        )
        == 1.0
    )


def test_assert_tests_may_use_a_module_the_solution_imported(all_):
    """MBPP asserts use ``math.isclose`` with no import of their own (the solution's served)."""
    tests = {"test": ["assert math.isclose(area(2), 12.566, rel_tol=0.001)", "assert re.fullmatch('a+', 'aa')"]}
    assert score(all_, "import math\ndef area(r):\n    return math.pi * r * r", tests) == 1.0
    assert score(all_, "def area(r):\n    return 12", tests) == 0.0


def test_assert_tests_see_arguments_changed_in_place(all_):
    tests = {
        "test": [
            "data = [3, 1, 2]\nseen = {}\nassert sort_in_place(data, seen) is None\n"
            "assert data == [1, 2, 3] and seen == {'n': 3}"
        ]
    }
    assert score(all_, "def sort_in_place(xs, seen):\n    xs.sort()\n    seen['n'] = len(xs)", tests) == 1.0
    assert score(all_, "def sort_in_place(xs, seen):\n    xs = sorted(xs)\n    seen['n'] = 3", tests) == 0.0


def test_assert_tests_that_pass_the_program_something_that_is_not_data_raise():
    s = scorer(time_limit_s=5.0, total_time_s=20.0)
    with pytest.raises(ValueError, match="the tests call apply with an argument that cannot be sent"):
        score(s, "def apply(f, x):\n    return f(x)", {"test": ["assert apply(lambda v: v, 1) == 1"]})


def test_calls_codec_is_exact_and_strict():
    import collections
    import decimal
    import fractions

    from rlvr_code.calls import Unsendable, decode, encode

    values = [
        None,
        False,
        3,
        -0.5,
        float("inf"),
        "é",
        b"\x00",
        2 - 1j,
        [1, [2]],
        (1, (2,)),
        {1, 2},
        frozenset({3}),
        {(1, 2): {"k": [None]}},
        10**400,
        range(1, 9, 2),
        bytearray(b"a"),
        {1: 2}.keys(),
        {1: 2}.items(),
        collections.deque([1], maxlen=2),
        fractions.Fraction(-1, 3),
        decimal.Decimal("-0.10"),
    ]
    for value in values:
        back = decode(encode(value))
        assert back == value and type(back) is type(value)
    assert list(decode(encode(map(abs, [-1, -2])))) == [1, 2]
    assert list(decode(encode({1: "a"}.values()))) == ["a"] and decode(encode(collections.deque([1], 2))).maxlen == 2
    assert str(decode(encode(decimal.Decimal("-0.10")))) == "-0.10"
    for bad in (type("I", (int,), {})(3), object(), [lambda: 0], {1: object()}):
        with pytest.raises(Unsendable):
            encode(bad)
    for bad in (
        ["x", 1],
        ["d", 1],
        ["c", "1", 2],
        ["b", 7],
        {"a": 1},
        [],
        ["l", ["t", ["q"]]],
        ["r", 1, 2, 0],
        ["r", 1.5, 2, 1],
        ["q", 0, 1],
        ["q", "3"],
        ["F", 1, 0],
        ["F", 1.0, 2],
        ["D", "x"],
        ["D", 1],
    ):
        with pytest.raises(ValueError):
            decode(bad)


def test_no_tests_means_the_reward_does_not_apply_and_no_program_scores_zero(share):
    assert share(prompt="p", completion=answer(CORRECT), example={"answer": "3"}) is None
    assert share(prompt="p", completion="the answer is print(3)", example={"tests": ADD}) == 0.0
    assert (
        share(prompt="p", completion=f"<think>{FENCE}python\n{CORRECT}\n{FENCE}</think>", example={"tests": ADD}) == 0.0
    )


def test_malformed_tests_raise_so_the_engine_masks_the_item(share):
    with pytest.raises(ValueError, match="call-based"):
        score(share, CORRECT, {"tests": {"inputs": [], "outputs": [], "fn_name": "f"}})


def test_total_time_budget_fails_the_cases_it_cannot_run():
    s = scorer(mode="share", time_limit_s=1.0, total_time_s=1.5)
    start = time.monotonic()
    value = score(s, "import time; time.sleep(10)", {"tests": ADD * 3})
    assert value == 0.0 and time.monotonic() - start < 8.0


def test_output_cap_fails_runaway_output_but_not_a_long_expected_output():
    s = scorer(output_limit_kb=1, time_limit_s=5.0, total_time_s=20.0)
    long = "\n".join(str(i) for i in range(2000)) + "\n"  # ~8.9 KB, above the 1 KB cap
    assert score(s, "for i in range(2000):\n    print(i)", {"tests": [{"input": "", "output": long}]}) == 1.0
    assert score(s, "while True:\n    print('x' * 1000)", {"tests": [{"input": "", "output": long}]}) == 0.0
    assert score(s, "print('y' * 1023)", {"tests": [{"input": "", "output": "y" * 1023}]}) == 1.0


def test_max_cases_uses_the_first_cases():
    s = scorer(mode="share", max_cases=2, time_limit_s=5.0, total_time_s=20.0)
    assert score(s, PARTIAL, {"tests": ADD}) == 0.5  # cases 1 and 2 only: one passes


def test_columns_are_configurable():
    s = scorer(tests_column="io", time_limit_s=5.0, total_time_s=20.0)
    assert score(s, CORRECT, {"io": ADD}) == 1.0
    assert score(s, CORRECT, {"tests": ADD}) is None


@pytest.mark.parametrize(
    "options, message",
    [
        ({"mode": "most"}, "option 'mode' must be one of 'all', 'share'"),
        ({"time_limit_s": 0}, "time_limit_s must be > 0"),
        ({"memory_mb": 16}, "memory_mb must be >= 64"),
        ({"max_processes": 0}, "max_processes must be >= 1"),
        ({"max_cases": -1}, "max_cases must be >= 0"),
        ({"isolation": "docker"}, "option 'isolation' must be one of 'auto', 'namespaces', 'basic'"),
        ({"time_limit": 1}, "did you mean 'time_limit_s'"),
        # past what an rlimit or the clock takes: every run would fail to start and be masked
        ({"memory_mb": 10**20}, "memory_mb must be >= 1 and <= 2147483647, got 100000000000000000000"),
        ({"output_limit_kb": 2**31}, "output_limit_kb must be >= 1 and <= 2147483647, got 2147483648"),
        ({"time_limit_s": 1e300, "total_time_s": 1e300}, "time_limit_s must be > 0 and <= 1000000.0, got 1e+300"),
    ],
)
def test_bad_options_fail_naming_the_plugin(options, message):
    with pytest.raises(PluginOptionError, match="code-tests") as info:
        CodeTestsPlugin.parse_options(options)
    assert message in str(info.value)


def test_registers_one_picklable_reward():
    import pickle

    registered = []
    CodeTestsPlugin(CodeTestsPlugin.parse_options({"weight": 2.0, "memory_mb": 256})).rlvr_reward_functions(
        registered.append
    )
    (reward,) = registered
    assert reward.name == "code-tests" and reward.weight == 2.0 and reward.isolated
    assert pickle.loads(pickle.dumps(reward.fn)) == reward.fn
    assert reward.fn.options.limits == Limits(
        time_s=2.0, memory_mb=256, max_processes=8, output_bytes=1024 * 1024, open_files=64, disk_mb=64
    )


ISOLATIONS = [
    pytest.param("namespaces", marks=pytest.mark.skipif(not namespaces_available(), reason="no namespaces")),
    "basic",
]


@pytest.mark.parametrize("mode", ISOLATIONS)
def test_engine_deadline_kills_the_worker_and_leaves_no_process(mode):
    from code_helpers import basic_python

    from rlvr_plugins.engine import RewardEngine

    token = f"303.{secrets.randbelow(10**6)}"
    code = f"import os, time\nos.posix_spawn('/bin/sleep', ['sleep', '{token}'], {{}})\ntime.sleep(60)"
    s = CodeTestsScorer(
        CodeTestsOptions(
            time_limit_s=60.0,
            total_time_s=60.0,
            isolation=mode,
            python=(basic_python() if mode == "basic" else None) or "",
        )
    )
    item = {"prompt": "p", "completion": answer(code), "example": {"tests": ADD}}
    with RewardEngine(num_workers=1, timeout_s=3.0) as engine:
        worker = engine._workers[0].proc.pid
        result = engine.score("code-tests", s, [item])
    assert result.failed == [True] and "timeout" in result.errors[0]
    assert survivors(token, wait_s=5.0) == []
    assert host_can_fork()
    # the killed worker's temporary directory is left behind, and removed by the next sweep
    left = [
        p for p in glob.glob(f"/tmp/rlvr-code-{worker}-*") + glob.glob(f"{tempfile.gettempdir()}/rlvr-code-{worker}-*")
    ]
    assert left and set(left) <= set(remove_stale_dirs("/tmp") + remove_stale_dirs())
    assert not any(os.path.exists(p) for p in left)


def test_a_sandbox_budget_over_the_engine_deadline_is_refused_at_start_up():
    from rlvr_code.plugins import CodeTestsPlugin
    from rlvr_plugins.errors import ConfigError

    plugin = CodeTestsPlugin(CodeTestsPlugin.parse_options({"total_time_s": 8.0}))
    plugin.rlvr_validate_run(engine_timeout_s=10.0)
    plugin.rlvr_validate_run(engine_timeout_s=None)
    with pytest.raises(ConfigError, match=r"total_time_s=8 does not fit under .* engine.timeout_s=6"):
        plugin.rlvr_validate_run(engine_timeout_s=6.0)


def test_assert_verdicts_do_not_depend_on_the_machine_load():
    """10,000 calls failed at load 4 on another box (2 s of wall clock, most of it the channel and
    the wait for a core); here 30,000 beside eight busy processes did. The verdict is now the
    program's CPU time against time_limit_s plus the channel's measured cost, so the load does
    not change it (a program over its CPU time still fails: test_code_attacks.py, "slow: 2.5 s
    of CPU")."""
    import subprocess
    import sys

    tests = {"test": "for i in range(30_000):\n    assert double(i) == 2 * i\n"}
    fast = "def double(x):\n    return 2 * x"
    s = scorer(time_limit_s=2.0, total_time_s=60.0)  # the wall-clock ceiling is the completion's whole budget
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(8)]
    try:
        time.sleep(0.5)
        assert score(s, fast, tests) == 1.0
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()


def test_the_channel_allowance_is_per_call_and_per_megabyte():
    from rlvr_code.plugins import CHANNEL_S_PER_CALL, CHANNEL_S_PER_MB, channel_allowance_s, channel_traffic

    assert channel_allowance_s(0, 0) == 0.0
    assert channel_allowance_s(10_000, 0) == pytest.approx(10_000 * CHANNEL_S_PER_CALL)
    assert channel_allowance_s(3, 5 << 20) == pytest.approx(3 * CHANNEL_S_PER_CALL + 5 * CHANNEL_S_PER_MB)
    assert channel_traffic(b"Traceback...\nrlvr-code-channel 12 3400\n") == (12, 3400)
    assert channel_traffic(b"rlvr-code-channel 12 3400\nprinted by the tests\n") == (0, 0)  # not the last line
