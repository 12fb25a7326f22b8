"""Estimator lab: bias and variance of advantage estimators against the exact policy gradient.

The test problem is one where the gradient of expected reward is known in closed form. A
batch holds ``P`` prompts; prompt ``p`` has ``K`` candidate answers, a softmax policy
``π_p = softmax(θ_p)`` over them (logits ``θ`` of shape ``(P, K)``) and a known reward
``c_pk`` for each answer (1 right, 0 wrong). The objective is

    J(θ) = 1/P Σ_p J_p,   J_p = Σ_k π_pk c_pk,   ∇_{θ_p} J = π_p ⊙ (c_p − J_p) / P.

One *draw* samples ``G`` answers ``a_p1 … a_pG ~ π_p`` for every prompt, scores them, asks
an advantage estimator for ``A_pi`` and forms the score-function (REINFORCE) estimate

    g_p = Σ_i w_pi A_pi (e_{a_pi} − π_p) / P,      w_pi = 1/G by default,

which is the gradient of the GRPO surrogate at the sampling policy (``e_k − π_p`` is
``∇_{θ_p} log π_pk``). Over many draws, ``E[g]`` is compared with ``∇J``: its cosine, its
bias after the best non-negative rescaling, and its variance. The estimators are called
through the plugin hook ``rlvr_compute_advantages`` with the trainer's arguments, so a
third-party estimator is audited as it would train.

A subtracted baseline that does not depend on ``a_pi`` leaves ``E[g] = ∇J`` (leave-one-out,
``rloo``); the group mean includes ``r_i`` and gives ``(G−1)/G · ∇J`` (``dr-grpo``).
With 0/1 rewards any estimator that acts group by group has ``E[g_p] = κ(J_p) ∇_{θ_p} J``,
one scale per prompt; dividing by the group's standard deviation (``grpo``) makes
``κ`` depend on the prompt's success rate, which turns the direction of ``E[g]`` away
from ``∇J`` as soon as prompts differ in difficulty.

Length: with per-response normalisation (GRPO's loss, TRL ``loss_type="grpo"``) the weight
is ``w_pi = 1/(G |o_i|)``, so a long wrong answer is pushed down less than a short one;
a constant normaliser (Dr. GRPO, ``w = 1/(G L)``) treats them alike; DAPO's token mean
uses ``w_pi = 1 / Σ_{j in group} |o_j|``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

ESTIMATOR_HOOK = "rlvr_compute_advantages"
REWARD_NAME = "correct"
WRONG_SHARES = (0.5, 0.3, 0.2)
NORMALISATIONS = ("per-response", "constant", "token-mean")
DRAW_CHUNK = 8192


# -- the problem -------------------------------------------------------------------


@dataclass(frozen=True)
class Problem:
    """A batch of prompts with a softmax policy over known answers.

    ``logits`` ``(P, K)``; ``correct`` ``(P, K)`` the reward of each answer; ``lengths``
    ``(P, K)`` tokens per answer (the estimator's ``completion_lengths``; default
    :func:`answer_lengths`).
    """

    name: str
    logits: np.ndarray
    correct: np.ndarray
    lengths: np.ndarray | None = None
    description: str = ""

    def __post_init__(self) -> None:
        if self.lengths is None:
            object.__setattr__(self, "lengths", answer_lengths(self.correct.shape))

    @property
    def probs(self) -> np.ndarray:
        return softmax(self.logits)

    @property
    def success(self) -> np.ndarray:
        """``(P,)`` ``J_p``, each prompt's expected reward."""
        return prompt_rewards(self.probs, self.correct)


ANSWER_TOKENS = 32
"""Answer ``k`` of a problem without lengths of its own is ``ANSWER_TOKENS * (k + 1)`` tokens long."""


def answer_lengths(shape: tuple[int, ...]) -> np.ndarray:
    """``(P, K)`` int: answer ``k`` has ``ANSWER_TOKENS * (k + 1)`` tokens, for every prompt.

    >>> answer_lengths((2, 3)).tolist()
    [[32, 64, 96], [32, 64, 96]]
    """
    return np.broadcast_to(ANSWER_TOKENS * np.arange(1, shape[1] + 1), shape).copy()


def softmax(logits: np.ndarray) -> np.ndarray:
    """``π = exp(θ) / Σ_k exp(θ_k)`` along the last axis; same shape as ``logits``."""
    z = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return z / z.sum(axis=-1, keepdims=True)


def prompt_rewards(probs: np.ndarray, correct: np.ndarray) -> np.ndarray:
    """``J_p = Σ_k π_pk c_pk``: ``(P, K), (P, K) → (P,)``."""
    return (probs * correct).sum(axis=-1)


def expected_reward(logits: np.ndarray, correct: np.ndarray) -> float:
    """``J(θ) = 1/P Σ_p Σ_k π_pk c_pk`` with ``π_p = softmax(θ_p)``; ``(P, K), (P, K) → float``."""
    return float(prompt_rewards(softmax(logits), correct).mean())


def exact_gradient(logits: np.ndarray, correct: np.ndarray) -> np.ndarray:
    """``∂J/∂θ_pk = π_pk (c_pk − J_p) / P``: ``(P, K), (P, K) → (P, K)``."""
    probs = softmax(logits)
    return probs * (correct - prompt_rewards(probs, correct)[:, None]) / probs.shape[0]


PASS_K = 4
"""The ``k`` of the audit's pass@k measurement (the ``pass-at-k`` estimator's default ``k``)."""
PASS_STEP = 1.0
"""Length ``‖Δθ‖`` of the one step along each expected update whose pass@1 and pass@k gains are reported."""


def pass_at_k(logits: np.ndarray, correct: np.ndarray, k: int) -> float:
    """``pass@k(θ) = 1/P Σ_p (1 − (1 − J_p)^k)``: the chance that one of ``k`` independent answers is right
    (``correct`` 0/1). ``k = 1`` is :func:`expected_reward`."""
    return float((1 - (1 - prompt_rewards(softmax(logits), correct)) ** k).mean())


def pass_at_k_gradient(logits: np.ndarray, correct: np.ndarray, k: int) -> np.ndarray:
    """``∂ pass@k / ∂θ_pk = k (1 − J_p)^(k−1) ∂J/∂θ_pk``: the exact gradient re-weighted per prompt
    towards the unsolved ones; ``(P, K), (P, K) → (P, K)``."""
    success = prompt_rewards(softmax(logits), correct)
    return k * (1 - success)[:, None] ** (k - 1) * exact_gradient(logits, correct)


def pass_gains(
    logits: np.ndarray, correct: np.ndarray, direction: np.ndarray, k: int = PASS_K, step: float = PASS_STEP
) -> dict[str, float]:
    """Change of pass@1 and pass@k after one step ``θ + step · d / ‖d‖`` along ``direction`` ``(P, K)``.

    Returns ``{"pass1_gain", "passk_gain", "passk_cosine"}``, the last ``cos ∠(d, ∇ pass@k)``.
    """
    d = direction / np.linalg.norm(direction)
    moved = logits + step * d
    gk = pass_at_k_gradient(logits, correct, k)
    return {
        "pass1_gain": expected_reward(moved, correct) - expected_reward(logits, correct),
        "passk_gain": pass_at_k(moved, correct, k) - pass_at_k(logits, correct, k),
        "passk_cosine": float(cosine(d.reshape(-1), gk.reshape(-1))),
    }


def success_problem(
    name: str, success: Sequence[float], wrong_shares: Sequence[float] = WRONG_SHARES, description: str = ""
) -> Problem:
    """Prompt ``p`` has one right answer of probability ``success[p]`` and ``len(wrong_shares)``
    wrong ones sharing ``1 − success[p]`` in the given proportions. ``K = 1 + len(wrong_shares)``."""
    s = np.asarray(success, dtype=float)[:, None]
    shares = np.asarray(wrong_shares, dtype=float) / np.sum(wrong_shares)
    probs = np.concatenate([s, (1 - s) * shares[None, :]], axis=1)
    correct = np.zeros_like(probs)
    correct[:, 0] = 1.0
    return Problem(name, np.log(probs), correct, description=description)


def equal_difficulty(prompts: int, success: float = 0.3) -> Problem:
    """Scenario (a): every prompt has the same success probability."""
    return success_problem(
        "equal", [success] * prompts, description=f"{prompts} prompts, each solved with probability {success}"
    )


def mixed_difficulty(prompts: int, low: float = 0.05, high: float = 0.95) -> Problem:
    """Scenario (b): success probabilities evenly spaced from ``low`` to ``high``."""
    return success_problem(
        "mixed",
        np.linspace(low, high, prompts).tolist(),
        description=f"{prompts} prompts, success probabilities {low} … {high}",
    )


def length_problem(prompts: int, short: int = 64, long: int = 512, low: float = 0.05, high: float = 0.95) -> Problem:
    """Four answers per prompt: right-short, right-long, wrong-short, wrong-long.

    The two right answers share ``J_p`` equally, the two wrong ones ``1 − J_p``, so the
    exact gradient on a long answer's logit equals that on the short answer of the same
    correctness; any difference comes from the loss's length normalisation.
    """
    s = np.linspace(low, high, prompts)[:, None]
    probs = np.concatenate([s / 2, s / 2, (1 - s) / 2, (1 - s) / 2], axis=1)
    correct = np.tile([1.0, 1.0, 0.0, 0.0], (prompts, 1))
    lengths = np.tile([short, long, short, long], (prompts, 1))
    return Problem(
        "length",
        np.log(probs),
        correct,
        lengths,
        description=f"{prompts} prompts, answers of {short} and {long} tokens, success {low} … {high}",
    )


LENGTH_ANSWERS = {"right-short": 0, "right-long": 1, "wrong-short": 2, "wrong-long": 3}


# -- draws ---------------------------------------------------------------------------


def sample_answers(probs: np.ndarray, group_size: int, draws: int, rng: np.random.Generator) -> np.ndarray:
    """``(D, P, G)`` int: ``a_dpi ~ π_p`` independently (inverse CDF)."""
    cdf = np.cumsum(probs, axis=-1)[:, :-1]
    u = rng.random((draws, probs.shape[0], group_size, 1))
    return (u >= cdf[None, :, None, :]).sum(axis=-1)


def answer_values(values: np.ndarray, answers: np.ndarray) -> np.ndarray:
    """``values[p, a_dpi]``: ``(P, K)`` per answer, ``(D, P, G)`` answers → ``(D, P, G)``."""
    return values[np.arange(values.shape[0])[:, None], answers]


def score_function_gradients(
    answers: np.ndarray, advantages: np.ndarray, probs: np.ndarray, weights: np.ndarray | None = None
) -> np.ndarray:
    """``g_dp = Σ_i w_dpi A_dpi (e_{a_dpi} − π_p) / P``.

    ``answers`` ``(D, P, G)`` int, ``advantages`` ``(D, P, G)``, ``probs`` ``(P, K)``,
    ``weights`` broadcastable to ``(D, P, G)`` (default ``1/G``) → ``(D, P, K)``.
    """
    d, num_prompts, _ = answers.shape
    k = probs.shape[1]
    aw = advantages * (1.0 / answers.shape[-1] if weights is None else weights)
    cell = (np.arange(d * num_prompts).reshape(d, num_prompts, 1) * k + answers).ravel()
    pushed = np.bincount(cell, weights=np.broadcast_to(aw, answers.shape).ravel(), minlength=d * num_prompts * k)
    return (pushed.reshape(d, num_prompts, k) - aw.sum(axis=-1)[..., None] * probs[None]) / num_prompts


def normalisation_weights(name: str, lengths: np.ndarray, answers: np.ndarray, max_length: float) -> np.ndarray:
    """Per-response loss weight ``w_dpi`` ``(D, P, G)`` of a loss normalisation.

    ``per-response``: ``1/(G |o_i|)`` (GRPO, TRL ``loss_type="grpo"``); ``constant``:
    ``1/(G L)`` with ``L = max_length`` (Dr. GRPO); ``token-mean``: ``1/Σ_{j in group} |o_j|``
    (DAPO's token-level mean, taken over the group). ``lengths`` ``(P, K)`` tokens per answer.
    """
    group_size = answers.shape[-1]
    tokens = answer_values(lengths.astype(float), answers)
    if name == "per-response":
        return 1.0 / (group_size * tokens)
    if name == "constant":
        return np.full(tokens.shape, 1.0 / (group_size * max_length))
    if name == "token-mean":
        return np.broadcast_to(1.0 / tokens.sum(axis=-1, keepdims=True), tokens.shape)
    raise ValueError(f"Unsupported normalisation: {name!r}. Supported: {list(NORMALISATIONS)}")


# -- statistics ----------------------------------------------------------------------


def cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``⟨a, b⟩ / (‖a‖ ‖b‖)`` over the last axis."""
    return (a * b).sum(-1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1))


def rescaled_bias(mean: np.ndarray, exact: np.ndarray) -> np.ndarray:
    """``min_{c ≥ 0} ‖c · mean − exact‖ / ‖exact‖`` over the last axis.

    Equals ``sin ∠(mean, exact)`` when the cosine is positive and 1 otherwise: 0 means
    the estimator is unbiased up to a positive scale.
    """
    c = np.maximum((mean * exact).sum(-1) / (mean * mean).sum(-1), 0.0)
    return np.linalg.norm(c[..., None] * mean - exact, axis=-1) / np.linalg.norm(exact, axis=-1)


def moment_stats(
    n: np.ndarray, sum_x: np.ndarray, sum_x2: np.ndarray, sum_xu2: np.ndarray, exact: np.ndarray
) -> dict[str, np.ndarray]:
    """Statistics of ``E[g]`` from sums over ``n`` draws; leading axes are replicates.

    ``sum_x``, ``sum_x2`` ``(..., P·K)`` sums of ``g`` and ``g²``; ``sum_xu2`` ``(...)`` sum of
    ``⟨g, u⟩²`` with ``u = ∇J/‖∇J‖``; ``exact`` ``(P, K)``. With ``m`` the mean and ``Σ`` the
    sample covariance:

    * ``cosine`` = cos ∠(m, ∇J); ``scale`` = ⟨m, ∇J⟩/‖∇J‖² (``E[g] ≈ scale · ∇J``);
    * ``bias`` = :func:`rescaled_bias`;
    * ``noise`` = ``sqrt(tr Σ_⊥ / n) / ‖m‖``, the ``bias`` an exactly unbiased estimator
      shows from Monte-Carlo error alone (``Σ_⊥`` is ``Σ`` projected off ``∇J``);
    * ``variance`` = ``tr Σ``; ``rel_variance`` = ``tr Σ / ‖m‖²``, the variance of ``g``
      rescaled so that its mean has the exact gradient's norm, relative to that norm²;
    * ``prompt_scale`` ``(..., P)`` = ``⟨m_p, ∇_p J⟩ / ‖∇_p J‖²``, each prompt's weight ``κ_p``.
    """
    e = exact.reshape(-1)
    u = e / np.linalg.norm(e)
    nn = n[..., None]
    m = sum_x / nn
    variance = ((sum_x2 / nn - m**2) * nn / (nn - 1)).sum(-1)
    mu = m @ u
    var_u = (sum_xu2 / n - mu**2) * n / (n - 1)
    norm_m2 = (m * m).sum(-1)
    ep = exact.reshape(exact.shape[0], -1)
    mp = m.reshape(*m.shape[:-1], *ep.shape)
    return {
        "cosine": cosine(m, e),
        "scale": (m @ e) / (e @ e),
        "bias": rescaled_bias(m, e),
        "noise": np.sqrt(np.maximum(variance - var_u, 0.0) / n / norm_m2),
        "variance": variance,
        "rel_variance": variance / norm_m2,
        "prompt_scale": (mp * ep).sum(-1) / (ep * ep).sum(-1),
    }


def summarize_gradients(
    grads: np.ndarray, exact: np.ndarray, rng: np.random.Generator, *, blocks: int = 50, replicates: int = 400
) -> dict[str, Any]:
    """:func:`moment_stats` of ``grads`` ``(D, P, K)`` with bootstrap standard errors.

    The ``D`` draws are cut into ``blocks`` consecutive blocks; the standard error of each
    statistic is its spread over ``replicates`` resamplings of the blocks with replacement.
    Returns ``{stat: value}`` and ``{stat + "_se": error}`` (lists for ``prompt_scale``).
    """
    d = grads.shape[0]
    x = grads.reshape(d, -1)
    e = exact.reshape(-1)
    xu2 = (x @ (e / np.linalg.norm(e))) ** 2
    counts, *sums = block_bootstrap_sums([np.ones(d), x, x * x, xu2], rng, blocks, replicates)
    point = moment_stats(np.array(float(d)), x.sum(0), (x * x).sum(0), xu2.sum(0), exact)
    boot = moment_stats(counts, *sums, exact)
    out: dict[str, Any] = {}
    for key, value in point.items():
        out[key] = _plain(value)
        out[f"{key}_se"] = _plain(np.std(boot[key], axis=0, ddof=1))
    out["draws"] = d
    return out


def block_bootstrap_sums(
    per_draw: Sequence[np.ndarray], rng: np.random.Generator, blocks: int, replicates: int
) -> list[np.ndarray]:
    """Bootstrap replicates of sums over draws: ``(D, ...)`` arrays → ``(replicates, ...)`` each.

    The ``D`` draws are cut into ``blocks`` consecutive blocks; each replicate sums
    ``blocks`` blocks drawn with replacement (the same blocks for every array).
    """
    d = per_draw[0].shape[0]
    starts = np.linspace(0, d, min(blocks, d) + 1).astype(int)[:-1]
    pick = rng.integers(0, len(starts), (replicates, len(starts)))
    return [np.add.reduceat(v, starts, axis=0)[pick].sum(1) for v in per_draw]


def length_push(
    per_answer: np.ndarray, rng: np.random.Generator, *, blocks: int = 50, replicates: int = 400
) -> dict[str, float]:
    """Expected gradient on each length-problem answer's logit, summed over prompts.

    ``per_answer`` ``(D, 4)``: each draw's ``Σ_p g_pk`` in :data:`LENGTH_ANSWERS` order. Returns the four
    ``E[Σ_p g_pk]``, the ratios ``wrong_ratio = E[g_wrong-long] / E[g_wrong-short]`` and
    ``right_ratio = E[g_right-long] / E[g_right-short]`` (1 for the exact gradient: the
    long answer is pushed as hard as the short one) and their bootstrap standard errors.
    """
    (boot,) = block_bootstrap_sums([per_answer], rng, blocks, replicates)
    mean = per_answer.mean(0)
    out = {name: float(mean[k]) for name, k in LENGTH_ANSWERS.items()}
    for label, long_k, short_k in (("wrong", 3, 2), ("right", 1, 0)):
        out[f"{label}_ratio"] = float(mean[long_k] / mean[short_k])
        out[f"{label}_ratio_se"] = float(np.std(boot[:, long_k] / boot[:, short_k], ddof=1))
    return out


def _plain(value: np.ndarray) -> Any:
    return value.tolist() if np.ndim(value) else float(value)


# -- estimators through the plugin path -----------------------------------------------


@dataclass
class Estimator:
    """One registered ``rlvr_compute_advantages`` implementation, enabled alone in a plugin set."""

    name: str
    distribution: str
    version: str
    plugin_set: Any = field(repr=False)

    def raw(self, rewards, num_generations: int, valid=None, lengths=None):
        """The hook's advantages ``(N,)`` for rewards ``(N,)``, called with the trainer's keyword arguments.

        Every completion is scored (``valid`` all True) by one reward function named
        :data:`REWARD_NAME`; ``lengths`` ``(N,)`` are its ``completion_lengths`` (default
        :data:`ANSWER_TOKENS` each). The shape is checked here; finiteness by :func:`finalize`.
        """
        import torch

        from ..errors import PluginContractError

        if valid is None:
            valid = torch.ones_like(rewards, dtype=torch.bool)
        if lengths is None:
            lengths = torch.full(rewards.shape, ANSWER_TOKENS, dtype=torch.long)
        raw = self.plugin_set.one(
            ESTIMATOR_HOOK,
            rewards=rewards,
            num_generations=num_generations,
            valid=valid,
            rewards_per_func=rewards[:, None],
            reward_names=[REWARD_NAME],
            reward_weights=torch.ones(1, dtype=rewards.dtype),
            completion_lengths=torch.as_tensor(lengths, dtype=torch.long).reshape(rewards.shape),
        )
        if not isinstance(raw, torch.Tensor) or raw.shape != rewards.shape:
            got = tuple(raw.shape) if isinstance(raw, torch.Tensor) else type(raw).__name__
            raise PluginContractError(
                f"plugin {self.name!r}: {ESTIMATOR_HOOK} returned {got}; "
                f"expected a tensor of shape {tuple(rewards.shape)}"
            )
        return raw.to(rewards.dtype)


def finalize(plugin: str, raw, rewards, num_generations: int):
    """Reject non-finite advantages naming ``plugin``, then apply the trainer's rules (all rows valid)."""
    import torch

    from ..advantages import finalize_advantages
    from ..errors import PluginContractError

    if not torch.isfinite(raw).all():
        raise PluginContractError(f"plugin {plugin!r}: {ESTIMATOR_HOOK} returned NaN or infinite values")
    return finalize_advantages(raw, rewards, torch.ones_like(rewards, dtype=torch.bool), num_generations)[0]


def _estimator_class(entry) -> type | None:
    from ..manager import implemented_hooks

    cls = entry.load()
    return cls if ESTIMATOR_HOOK in implemented_hooks(cls) else None


def available_estimators() -> list[str]:
    """Names of the installed plugins implementing ``rlvr_compute_advantages`` (built-in and entry points).

    Imports every plugin to read its hooks; one that fails to import is left out with a warning.
    """
    import logging

    from ..errors import PluginError
    from ..manager import discover

    names = []
    for name, entry in sorted(discover().items()):
        try:
            if _estimator_class(entry) is not None:
                names.append(name)
        except PluginError as exc:
            logging.getLogger(__name__).warning("left out of the audit: %s", exc)
    return names


def load_estimators(names: Sequence[str] | None = None) -> list[Estimator]:
    """Enable each estimator alone, with its default options, in its own :class:`~rlvr_plugins.manager.PluginSet`.

    ``names=None`` means every installed estimator; one that cannot be enabled without
    options is then left out with a warning. A name that is not an installed estimator
    raises :class:`~rlvr_plugins.errors.ConfigError` listing the valid ones. The plugin set
    holds the estimator only (no default sampler or template: nothing else is called).
    """
    import logging

    from ..errors import ConfigError, PluginError
    from ..manager import EnabledPlugin, PluginSet, discover

    entries = discover()
    wanted = list(dict.fromkeys(names)) if names else available_estimators()
    unknown = [n for n in wanted if n not in entries or _estimator_class(entries[n]) is None]
    if unknown:
        valid = available_estimators()
        raise ConfigError([f"Unsupported estimator: {n!r}. Supported: {valid}" for n in unknown], source="--estimator")
    estimators = []
    for n in wanted:
        entry = entries[n]
        cls = entry.load()
        try:
            plugin = EnabledPlugin(n, cls(cls.parse_options({})), entry)
        except PluginError as exc:
            if names:
                raise
            logging.getLogger(__name__).warning("left out of the audit: %s", exc)
            continue
        estimators.append(Estimator(n, entry.distribution, entry.version, PluginSet([plugin])))
    return estimators


def acts_per_group(
    estimator: Estimator, rewards: np.ndarray, group_size: int, lengths: np.ndarray | None = None
) -> bool:
    """True when advantages of several batches stacked into one call equal the batches called alone.

    ``rewards`` ``(B, N)``, ``B ≥ 2`` sample batches, their answers' ``lengths`` ``(B, N)`` (default
    :data:`ANSWER_TOKENS` each). A group-local estimator (``grpo``,
    ``rloo``, ``dr-grpo``) passes and is then called once for thousands of draws; one that
    uses batch-wide statistics (``batch-std``) fails and is called once per draw, as the
    trainer calls it once per generation batch.
    """
    import torch

    batches = torch.as_tensor(rewards, dtype=torch.float32)
    tokens = torch.as_tensor(np.full(rewards.shape, ANSWER_TOKENS) if lengths is None else lengths, dtype=torch.long)
    alone = torch.cat([estimator.raw(row, group_size, lengths=n) for row, n in zip(batches, tokens)])
    stacked = estimator.raw(batches.reshape(-1), group_size, lengths=tokens.reshape(-1))
    return bool(torch.allclose(alone, stacked, rtol=1e-5, atol=1e-6))


def draw_advantages(
    estimator: Estimator, rewards: np.ndarray, group_size: int, stacked: bool, lengths: np.ndarray | None = None
) -> np.ndarray:
    """``(D, N)`` advantages for ``(D, N)`` rewards of answers ``lengths`` ``(D, N)`` tokens long (default
    :data:`ANSWER_TOKENS` each), each row one generation batch.

    ``stacked``: one hook call for all rows; otherwise one call per row. The trainer's
    finalisation acts group by group, so it is applied once to all rows.
    """
    import torch

    flat = torch.as_tensor(rewards, dtype=torch.float32).reshape(-1)
    tokens = torch.as_tensor(
        np.full(rewards.shape, ANSWER_TOKENS) if lengths is None else lengths, dtype=torch.long
    ).reshape(-1)
    if stacked:
        raw = estimator.raw(flat, group_size, lengths=tokens)
    else:
        valid = torch.ones(rewards.shape[1], dtype=torch.bool)
        raw = torch.cat(
            [
                estimator.raw(row, group_size, valid, n)
                for row, n in zip(flat.view(rewards.shape), tokens.view(rewards.shape))
            ]
        )
    return finalize(estimator.name, raw, flat, group_size).double().numpy().reshape(rewards.shape)


# -- the audit -----------------------------------------------------------------------


@dataclass(frozen=True)
class AuditSize:
    """How large an audit is: prompts per batch ``P``, group size ``G``, Monte-Carlo draws ``D``."""

    prompts: int = 8
    generations: int = 8
    draws: int = 4000
    short: int = 64
    long: int = 512
    seed: int = 0


QUICK = AuditSize()
FULL = AuditSize(prompts=16, draws=100_000)


def scenarios(size: AuditSize) -> list[Problem]:
    return [equal_difficulty(size.prompts), mixed_difficulty(size.prompts)]


def iter_draws(
    estimator: Estimator, problem: Problem, size: AuditSize, seed_key: int, stacked: bool
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """``size.draws`` draws of ``problem`` in chunks of at most :data:`DRAW_CHUNK`.

    Yields ``answers`` ``(d, P, G)`` and the estimator's ``advantages`` ``(d, P, G)``. Every
    estimator sees the same draws: the generator is seeded by ``size.seed`` and ``seed_key`` only.
    """
    rng = np.random.default_rng([size.seed, seed_key])
    for start in range(0, size.draws, DRAW_CHUNK):
        answers = sample_answers(problem.probs, size.generations, min(DRAW_CHUNK, size.draws - start), rng)
        rewards = answers_rewards(problem, answers)
        lengths = answers_lengths(problem, answers)
        yield answers, draw_advantages(estimator, rewards, size.generations, stacked, lengths).reshape(answers.shape)


def probe_stacking(estimator: Estimator, size: AuditSize) -> bool:
    """:func:`acts_per_group` on four batches of the mixed-difficulty problem."""
    problem = mixed_difficulty(size.prompts)
    answers = sample_answers(problem.probs, size.generations, 4, np.random.default_rng([size.seed, 97]))
    return acts_per_group(
        estimator, answers_rewards(problem, answers), size.generations, answers_lengths(problem, answers)
    )


def answers_rewards(problem: Problem, answers: np.ndarray) -> np.ndarray:
    """``(D, P·G)`` rewards of ``(D, P, G)`` answers, the groups contiguous as the trainer lays them out."""
    return answer_values(problem.correct, answers).reshape(answers.shape[0], -1)


def answers_lengths(problem: Problem, answers: np.ndarray) -> np.ndarray:
    """``(D, P·G)`` token counts of ``(D, P, G)`` answers, laid out as :func:`answers_rewards`."""
    assert problem.lengths is not None  # set by Problem.__post_init__
    return answer_values(problem.lengths, answers).reshape(answers.shape[0], -1)


def audit_estimator(estimator: Estimator, size: AuditSize) -> dict[str, Any]:
    """Bias/variance on each scenario and the length experiment for one estimator."""
    stacked = probe_stacking(estimator, size)
    out: dict[str, Any] = {
        "name": estimator.name,
        "distribution": estimator.distribution,
        "version": estimator.version,
        "calls": "stacked" if stacked else "per batch",
        "scenarios": {},
        "length": {},
    }
    for key, problem in enumerate(scenarios(size)):
        grads = np.concatenate(
            [
                score_function_gradients(answers, adv, problem.probs)
                for answers, adv in iter_draws(estimator, problem, size, key, stacked)
            ]
        )
        exact = exact_gradient(problem.logits, problem.correct)
        out["scenarios"][problem.name] = summarize_gradients(grads, exact, np.random.default_rng([size.seed, 99, key]))
        out["scenarios"][problem.name].update(pass_gains(problem.logits, problem.correct, grads.mean(axis=0)))
    problem = length_problem(size.prompts, size.short, size.long)
    per_answer: dict[str, list[np.ndarray]] = {norm: [] for norm in NORMALISATIONS}
    for answers, adv in iter_draws(estimator, problem, size, len(out["scenarios"]), stacked):
        for norm, chunks in per_answer.items():
            w = normalisation_weights(norm, problem.lengths, answers, max_length=size.long)
            chunks.append(score_function_gradients(answers, adv, problem.probs, w).sum(axis=1))
    for norm, chunks in per_answer.items():
        out["length"][norm] = length_push(np.concatenate(chunks), np.random.default_rng([size.seed, 98]))
    return out


def run_audit(estimators: Iterable[Estimator], size: AuditSize = QUICK) -> dict[str, Any]:
    """Audit every estimator; a JSON-ready dict with the problems, the size and the results.

    An estimator that raises is left out with a warning naming it and the error (in ``skipped``),
    so one broken plugin does not cost the others' audit; when every one fails, the first error is raised.
    """
    import logging

    problems = scenarios(size)
    audited, skipped, first_error = [], [], None
    for estimator in estimators:
        try:
            audited.append(audit_estimator(estimator, size))
        except Exception as exc:  # third-party estimator code: report it, audit the others
            error = f"{type(exc).__name__}: {exc}"
            logging.getLogger(__name__).warning(
                "estimator %r (%s) failed and is left out of the audit: %s",
                estimator.name,
                estimator.distribution,
                error,
            )
            skipped.append({"name": estimator.name, "distribution": estimator.distribution, "error": error})
            first_error = first_error or exc
    if first_error is not None and not audited:
        raise first_error
    return {
        "size": dataclasses.asdict(size),
        "scenarios": {
            p.name: {
                "description": p.description,
                "success": p.success.tolist(),
                "expected_reward": expected_reward(p.logits, p.correct),
                "pass_k": PASS_K,
                "pass_at_k": pass_at_k(p.logits, p.correct, PASS_K),
                "exact_pass1_step": pass_gains(p.logits, p.correct, exact_gradient(p.logits, p.correct)),
                "exact_passk_step": pass_gains(p.logits, p.correct, pass_at_k_gradient(p.logits, p.correct, PASS_K)),
            }
            for p in problems
        },
        "estimators": audited,
        "skipped": skipped,
    }


def verdict(stats: dict[str, Any], sigmas: float = 3.0) -> str:
    """``biased`` when the rescaled bias exceeds ``sigmas`` times its Monte-Carlo noise floor."""
    if not math.isfinite(stats["bias"]) or stats["cosine"] <= 0:
        return "wrong direction"
    return "biased" if stats["bias"] > sigmas * stats["noise"] else "unbiased up to scale"
