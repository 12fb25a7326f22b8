"""Fixtures of this repository's tests. The shared ones (``tokenizer``, ``tiny_trainer``, ``reward_plugin``,
``rlvr_cli``) come from the pytest plugin ``rlvr_plugins.testing.pytest_plugin``; helpers live in
``rlvr_plugins.testing``."""

from __future__ import annotations

import pytest

collect_ignore = ["multiproc"]  # scripts that torch.distributed.run launches, read sys.argv when imported


@pytest.fixture
def one_torch_thread():
    """Tiny models run faster on one thread; on a shared, busy machine two threads contend (5x slower)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def rank_runs(tmp_path_factory):
    """The scenarios of tests/multiproc/ranks.py that compare one process with two, in one launch on one
    process and one on two (side by side: the one-process launch leaves a core idle), once per session:
    ``{1: {scenario: rows}, 2: {...}}``. The launch on two processes also runs ``masked`` (fault item 17).
    Without rlvr-kimi the scenarios that need it are left out."""
    import importlib.util
    from concurrent.futures import ThreadPoolExecutor

    from multiproc_launch import COMPARED, KIMI, run_scenarios

    kimi = importlib.util.find_spec("rlvr_kimi") is not None
    compared = [s for s in COMPARED if kimi or s not in KIMI]
    out = tmp_path_factory.mktemp("ranks")
    with ThreadPoolExecutor(2) as pool:
        one = pool.submit(run_scenarios, out / "one", compared, 1)
        two = pool.submit(run_scenarios, out / "two", [*compared, "masked"], 2)
        return {1: one.result(), 2: two.result()}


@pytest.fixture(scope="session")
def sft_policy(tmp_path_factory):
    """A tiny policy that gets some one-digit additions right, built once per test session (~20 s):
    the starting point of every recipe smoke run, so their GRPO steps have a learning signal."""
    import torch

    from rlvr_plugins.testing import sft_policy as build

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return build(tmp_path_factory.mktemp("sft-policy"))
    finally:
        torch.set_num_threads(before)
