"""Every hook of rlvr-plugins, in the order they fire during a run.

This module is the map of the system. Each hook is called with keyword arguments only,
so a hook can gain a parameter later without breaking an implementation: an
implementation declares just the arguments it uses.

Three calling modes (every implementation is called through pluggy's caller, one plugin
at a time, in the config's order: ``PluginSet.call`` / ``first`` / ``one``; so
``RLVR_TRACE_PLUGINS=1`` and ``PluginSet.add_monitor`` see each call):

* **collect-all**: every enabled plugin that implements the hook is called, and the
  framework records which plugin returned what (so an error names the culprit).
* **first result**: the implementations are called in the config's order until one
  returns something other than ``None``; that result wins.
* **one winner**: exactly one enabled plugin answers. Enabling two plugins that both
  implement a one-winner hook is an error at start-up naming both; when none of the
  enabled plugins implements it, the built-in default answers (``grpo``,
  ``repeat-sampler``, ``plain-template``).

Shapes: ``N`` is the number of completions in the batch gathered from every process
(``num_prompts * G``), ordered so that the ``G = num_generations`` completions of one
prompt are contiguous; ``K`` is the number of reward functions.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pluggy

from . import PROJECT

if TYPE_CHECKING:
    import torch
    from torch.utils.data import Sampler

    from .plugin import Environment, RewardExploit, RewardFunction
    from .rollout_pool import GroupSelection, GroupSummary
    from .segment_plan import SegmentPlan

hookspec = pluggy.HookspecMarker(PROJECT)

ONE_WINNER_HOOKS = (
    "rlvr_compute_advantages",
    "rlvr_train_sampler",
    "rlvr_render_prompt",
    "rlvr_rollout_func",
    "rlvr_select_groups",
    "rlvr_pool_prompts",
    "rlvr_rollout_segments",
)
ABSTAINING_HOOKS = ("rlvr_rollout_func", "rlvr_rollout_segments")
FIRST_RESULT_HOOKS = ("rlvr_sft_examples",)


@hookspec
def rlvr_register_commands(subparsers: Any) -> None:
    """Add commands to the ``rlvr`` command line (llm's ``register_commands``).

    Called once when the ``rlvr`` parser is built, unless the command line names a built-in
    command, for every *installed* plugin (enabled or not, each with its default options), in
    the order of the plugin names. Collect-all. A name that is already taken (a built-in command
    or another plugin's) is an error naming the plugin.

    :param subparsers: argparse's subparsers action: ``p = subparsers.add_parser("name",
        help=...)``, then ``p.add_argument(...)`` and ``p.set_defaults(func=run)``, where
        ``run(args) -> int`` returns the exit code (raise an ``RLVRError`` for a clean error line).
    :returns: nothing.
    """


@hookspec
def rlvr_adjust_grpo_config(grpo_kwargs: dict[str, Any], trainer_section: Mapping[str, Any]) -> None:
    """Adjust the keyword arguments of TRL's ``GRPOConfig`` before it is built.

    Called once per run, at start-up, after the config is validated and before any model
    is loaded (``rlvr train``, ``--check``, and the commands that score), in the config's
    order. Collect-all. ``RLVRTrainer`` calls it for a ``GRPOConfig`` built in Python (then
    ``grpo_kwargs`` holds that config's fields and ``trainer_section`` those that differ
    from a fresh ``GRPOConfig``); a field the caller set that a plugin changes is refused.

    :param grpo_kwargs: the arguments that will be passed to ``GRPOConfig``; mutate in place.
    :param trainer_section: the user's ``trainer:`` section as written (read-only), so a
        plugin can tell a value the user chose from a default and refuse a contradiction
        (raise :class:`rlvr_plugins.errors.ConfigError` naming the key).
    :returns: nothing.
    """


@hookspec
def rlvr_reward_functions(register: Callable[[RewardFunction], None]) -> None:
    """Contribute reward functions.

    Called once per plugin set, the first time its rewards are needed (``rlvr train``:
    its start-up check; ``rlvr score`` / eval / filter / distill: their set-up); the list
    is kept for the rest of the run. Collect-all.
    Call ``register(RewardFunction(...))`` once per reward; the host checks the type,
    records the plugin that registered it and rejects two rewards with the same name.
    Each reward becomes one TRL reward function, weighted by ``RewardFunction.weight``
    and logged as ``rewards/<name>/mean``.

    :param register: the registration callback.
    :returns: nothing.
    """


@hookspec
def rlvr_environments(register: Callable[[Environment], None]) -> None:
    """Contribute environments: multi-turn episodes whose methods the policy calls as tools.

    Called once per plugin set, the first time the environments are needed (the start-up check of
    ``rlvr train``, ``--check`` and every command that scores; ``RLVRTrainer.__init__``); the list is
    kept for the rest of the run. Collect-all. Call ``register(Environment(name=..., factory=...))``
    once per environment; the host checks the type, records the plugin and rejects two environments of
    one name, naming both plugins.

    The trainer hands the factories to TRL's ``environment_factory``: the factory itself when one
    environment is enabled, a ``{name: factory}`` mapping when several are (each row's ``environment``
    column then chooses). Generation and the tool loop are TRL's (``max_tool_calling_iterations``);
    tool-result tokens are out of the loss (TRL's tool mask). The episode's environment object reaches
    a reward function as its ``environment`` keyword (``RewardFunction(isolated=False)``).

    :param register: the registration callback.
    :returns: nothing.
    """


@hookspec
def rlvr_validate_run(
    reward_names: list[str], grpo_args: Any, engine_timeout_s: float | None, multi_turn: bool
) -> None:
    """Check, at start-up, that the run makes sense for this plugin.

    Called once per run, after every reward is registered and before any model is loaded
    (``rlvr train``, ``--check`` and every command that scores; ``RLVRTrainer`` calls it for
    arguments nobody checked yet). Collect-all. Raise
    :class:`rlvr_plugins.errors.ConfigError` naming the plugin and option to stop the run
    (e.g. a penalty that reads a reward that is not enabled).

    :param reward_names: the names of every registered reward, in column order (a script's
        ``reward_funcs`` first, under TRL's names, then the plugins').
    :param grpo_args: the ``GRPOConfig`` the run will use (read-only).
    :param engine_timeout_s: the reward engine's hard deadline per completion, in seconds
        (``engine.timeout_s``), or ``None`` when rewards run in-process without one. A
        reward with its own time budget (a sandbox, a judge's HTTP retries) checks that the
        budget fits under it.
    :param multi_turn: True when the run has tools or an environment (TRL's tool loop), for a
        plugin whose part does not work there (a ``rollout_func``: TRL's loop would use it for
        the first turn only).
    :returns: nothing.
    """


@hookspec
def rlvr_claims() -> list[str] | None:
    """Name what this plugin takes charge of alone, so that two plugins that both would are refused.

    Called once per run, just before ``rlvr_validate_run`` (so also by ``--check`` and every
    command that scores). Collect-all. Two enabled plugins that return the same claim stop the
    run with :class:`rlvr_plugins.errors.PluginConflictError` naming both plugins and the
    claim, before any model is loaded. A claim is a free-form string; the shipped ones are
    ``"truncated-completions"`` (a length shaping that penalises the completions cut at
    ``max_completion_length``: ``dapo-overlong``) and ``"length-by-correctness"`` (a length
    reward whose shape depends on the answer's correctness: ``kimi-length``, ``cosine-length``).

    :returns: the claims (a list of strings), or ``None`` for none.
    """


@hookspec
def rlvr_check_dataset(rows: Sequence[Mapping[str, Any]], split: str) -> list[tuple[int, str]] | None:
    """Check the rows of one loaded split, once, before anything is generated or scored.

    Called once per loaded split by every command that scores it (``rlvr train``: the train
    and the eval split, after they are loaded and before they are rendered; ``rlvr eval``,
    ``filter``, ``distill``: the split they score; ``rlvr score``: the completions file), on
    the main process only. Collect-all. Keep it fast (seconds for a whole dataset): it runs
    in the main process while nothing else can.

    Report what the plugin would otherwise find only when it scores the row (once per
    worker process, or never): e.g. a reference that its checker can never parse. The
    framework logs one warning per plugin and problem, naming at most
    :data:`rlvr_plugins.train.data.MAX_NAMED_ROWS` rows (with their file line when known) and how
    many more. To refuse the data, raise :class:`rlvr_plugins.train.data.DataError` naming the row.

    :param rows: the split's rows with canonical columns (``prompt``, usually ``answer``),
        in order, before rendering (read-only).
    :param split: ``"train"``, ``"eval"`` or ``"completions"`` (``rlvr score``'s input).
    :returns: ``(row index, problem)`` pairs, the index into ``rows`` and a problem text
        that does not repeat the row (rows with the same text are reported together); an
        empty list or ``None`` when every row is fine.
    """


@hookspec(firstresult=True)
def rlvr_sft_examples(rows: list[dict[str, Any]], completion_column: str, seed: int) -> list[dict[str, Any]] | None:
    """Rewrite the rows of the SFT cold start (e.g. mix thinking and non-thinking examples).

    Called once per SFT stage, before the SFT rows are rendered: by ``rlvr sft`` and by
    ``rlvr train``'s ``sft:`` stage, on the same rows (the first ``sft.examples`` rows of the
    train split), so both fine-tune on the same examples. First result (stops at the first
    non-None result): the implementations are called in the config's order and the first
    one that returns rows wins (the others are not called); when every plugin returns
    ``None`` the rows are used as they are.

    :param rows: the SFT rows before rendering (canonical columns ``prompt``, usually
        ``answer``, and ``completion_column``); a copy, the plugin may keep or change it.
    :param completion_column: the column that holds each row's target (``sft.completion_column``).
    :param seed: the run's seed, for reproducible per-row decisions.
    :returns: the rows to fine-tune on, each with ``prompt`` (rendered afterwards by the
        template plugin, with its index in the returned list) and ``completion_column`` (the
        text that follows the *rendered* prompt); or ``None`` to abstain.
    """


@hookspec(firstresult=True)
def rlvr_render_prompt(
    example: Mapping[str, Any], index: int, seed: int, tokenizer: Any, multi_turn: bool
) -> str | list[dict]:
    """Render one dataset row into the prompt the policy sees (the thinking-mode template).

    Called once per row when the train and eval sets are prepared, before training.
    One winner; default ``plain-template`` returns ``example["prompt"]`` unchanged.

    :param example: the row, with the canonical columns ``prompt`` (str or chat
        messages) and ``answer`` plus any other columns of the dataset.
    :param index: the row's position in its split, for per-row decisions that must be
        reproducible (e.g. which prompts are rendered in non-thinking mode).
    :param seed: the run's seed.
    :param tokenizer: the policy's tokenizer (chat template, special tokens).
    :param multi_turn: True when an environment is enabled (TRL's tool loop): the prompt
        must then be chat messages, which TRL renders once with the tools' schemas and the
        run's ``chat_template_kwargs`` (one for every row); a per-row choice (a thinking mode)
        must travel in the messages, not in a pre-rendered text.
    :returns: a string (plain-text prompt) or a list of chat messages that TRL renders
        with the tokenizer's chat template.
    """


@hookspec(firstresult=True)
def rlvr_train_sampler(
    dataset: Any,
    num_generations: int,
    prompts_per_batch: int,
    repeat_count: int,
    shuffle: bool,
    seed: int,
    grpo_args: Any,
) -> Sampler:
    """Build the sampler that orders the training prompts (the curriculum).

    Called once when the train dataloader is built. One winner; default
    ``repeat-sampler`` is TRL's ``RepeatSampler``.

    The sampler must keep TRL's contract: it yields dataset indices where each prompt
    appears ``num_generations`` times in a row, in chunks of ``prompts_per_batch``
    distinct prompts; each chunk is yielded ``repeat_count`` times in a row
    (``num_iterations * steps_per_generation``); and every process yields the same
    sequence (update any state only from gathered statistics, see
    :func:`rlvr_on_rewards`). With the rollout pool on, the same plugin must also answer
    :func:`rlvr_pool_prompts` (the prompts of the pool's extra rounds).

    :param dataset: the prepared train dataset (a ``datasets.Dataset``; column
        ``rlvr_index`` holds each row's index).
    :param num_generations: G, completions per prompt.
    :param prompts_per_batch: distinct prompts per generation batch
        (``generation_batch_size / G``).
    :param repeat_count: how many times each chunk is repeated.
    :param shuffle: the ``shuffle_dataset`` setting.
    :param seed: the run's seed.
    :param grpo_args: the run's ``GRPOConfig`` (read-only; e.g. ``gradient_accumulation_steps``,
        ``ignore_data_skip`` for a sampler that keeps its own position on resume).
    :returns: a ``torch.utils.data.Sampler`` over dataset indices.
    """


@hookspec(firstresult=True)
def rlvr_rollout_func(tokenizer: Any, num_generations: int, grpo_args: Any) -> Callable[[list, Any], dict] | None:
    """Provide a custom generation procedure (TRL's ``rollout_func``), e.g. a thinking budget.

    Called once when the trainer is built. One winner, with no default, and a plugin may
    abstain by returning ``None`` (e.g. when its budget option is off): two plugins that
    both return a rollout are an error naming both; when none does, TRL generates as
    usual (transformers ``generate`` or vLLM). A rollout in a run with tools or an
    environment is refused (:class:`~rlvr_plugins.errors.ConfigError` naming the plugin): TRL's
    tool loop would generate only the first turn with it and drop its ``env_mask``.

    The returned callable is TRL's ``rollout_func(prompts, trainer) -> dict``: it receives
    this process's prompts, in which the sampler already repeats each prompt
    ``num_generations`` times in a row, and must return one completion per entry:
    ``prompt_ids``, ``completion_ids`` and ``logprobs`` (lists, in the order of
    ``prompts``); an optional ``env_mask`` (per completion token, 1 = generated by the
    policy, 0 = injected) keeps injected tokens out of the loss. Other keys reach the
    reward functions as columns.

    :param tokenizer: the policy's tokenizer.
    :param num_generations: G, completions per prompt in training.
    :param grpo_args: the run's ``GRPOConfig`` (read-only; e.g. ``max_completion_length``).
    :returns: the rollout callable, or ``None`` to leave generation to TRL.
    """


@hookspec(firstresult=True)
def rlvr_rollout_segments(grpo_args: Any) -> SegmentPlan | None:
    """Generate trajectories in segments of a per-round token budget (partial rollouts, Kimi k1.5 §2.6.2).

    Called when a command checks the run (``rlvr train``, ``--check``, ``rlvr eval``: before any model loads;
    settings the plan cannot run with are refused there, :func:`rlvr_plugins.segment_plan.segment_conflict`)
    and when the trainer is built: cheap, no side effects. One winner, no default, and a plugin may abstain by
    returning ``None``: two plugins that both return a plan are an error naming both. A plan turns the
    rollout pool on (with or without a ``rlvr_select_groups`` policy). Each generation round of the pool then
    gives every trajectory at most ``plan.tokens`` new tokens; a group whose members have not all
    finished (EOS or ``max_completion_length``) waits with their tokens so far, the step of each
    token and (``plan.stale`` = truncated-is) the behaviour log-probs recorded when it was generated,
    and is continued by the next round, from the policy of that round, before fresh prompts fill it.
    Only finished groups are *ready*: ``rlvr_on_rewards`` sees a group once, when it is ready, and the
    pool policy (or, without one, the oldest ready groups first) is asked only once ``needed`` are.
    Tokens of a trajectory generated at an earlier step than its last segment are *stale*; the loss
    masks them or weights them by ``min(π_old / π_behaviour, C)``
    (:func:`rlvr_plugins.segments.stale_weights`; under vLLM with TRL's importance-sampling correction on,
    that correction on the sampling log-probs vLLM recorded). Refused at start-up with tools, an environment,
    a ``rollout_func``, a train sampler that learns from its groups and (truncated-is) the ``vespo`` loss.

    :param grpo_args: TRL's ``GRPOConfig`` of the run (read-only).
    :returns: a :class:`~rlvr_plugins.segment_plan.SegmentPlan`, or ``None`` for whole trajectories.
    """


@hookspec
def rlvr_trainer_callbacks(trainer: Any) -> list[Any] | None:
    """Add ``transformers.TrainerCallback`` objects to the trainer (held-out evaluations,
    early stopping, extra logging), for a run from a config and a trainer built in Python alike.

    Called once, at the end of ``RLVRTrainer.__init__`` (the trainer is complete: model,
    ``plugin_set``, ``engines``, ``args``), in the config's order; each returned callback is
    added with ``trainer.add_callback`` after the callbacks the trainer was given.
    Collect-all.

    :param trainer: the ``RLVRTrainer`` being built.
    :returns: a list of callbacks (instances or classes), or ``None`` for none.
    """


@hookspec
def rlvr_length_penalty(
    completion_lengths: torch.Tensor,
    num_generations: int,
    rewards_per_func: torch.Tensor,
    reward_names: list[str],
    step: int,
) -> torch.Tensor | None:
    """Return a length penalty (or length reward) per completion: reward shaping.

    Called once per generation batch, after the rewards are gathered from every process
    and before the advantages are computed. Collect-all: each enabled plugin's tensor
    (already weighted by the plugin) is added to the total reward and logged as
    ``penalties/<plugin>/mean``. Return ``None`` to contribute nothing this step. When the
    plugin's ``weight`` option is a schedule (:mod:`rlvr_plugins.schedules`), the plugin sees
    ``weight = 1.0`` and the framework multiplies the tensor by the schedule's value at ``step``.

    The sum of the penalties is not shown to the estimator: it is added to the
    estimator's advantages as ``p_i - mean_j p_j`` over the group (never divided by a
    standard deviation, so an all-wrong group that differs only in length keeps
    advantages of the penalty's size; see docs/loss-variants.md).

    :param completion_lengths: ``(N,)`` long, completion length in tokens (every token of
        the completion, including tokens a rollout plugin injected, e.g. a thinking-budget
        stop text; padding excluded). In an episode with tools: the tokens the policy wrote,
        its turns, without the tool results (as TRL's ``completions/mean_length``).
    :param num_generations: G; group ``g`` is rows ``g*G … g*G+G-1``.
    :param rewards_per_func: ``(N, K)`` float, each reward function's raw value (NaN
        where a function did not apply or could not score).
    :param reward_names: the ``K`` reward names, in column order.
    :param step: the trainer's global step (for warm-up schedules).
    :returns: ``(N,)`` float tensor, or ``None``.
    """


@hookspec(firstresult=True)
def rlvr_compute_advantages(
    rewards: torch.Tensor,
    num_generations: int,
    valid: torch.Tensor,
    rewards_per_func: torch.Tensor,
    reward_names: list[str],
    reward_weights: torch.Tensor,
    completion_lengths: torch.Tensor,
) -> torch.Tensor:
    """Turn the total reward of each completion into its advantage (the estimator).

    Called once per generation batch, on rewards gathered from every process; the
    framework then slices the result back to each process. One winner; default
    ``grpo``.

    The framework enforces two rules on the result, whatever the estimator: a
    completion with ``valid == False`` gets advantage 0, and a group whose valid rewards
    are all equal gets advantage exactly 0 (counted as zero-variance).

    :param rewards: ``(N,)`` float, weighted sum of the rewards (the outcome; length
        penalties are added after the estimator, see ``rlvr_length_penalty``); NaN where
        the completion has no score.
    :param num_generations: G; group ``g`` is rows ``g*G … g*G+G-1``.
    :param valid: ``(N,)`` bool, False where the completion has no score (a reward
        timed out or raised, or no reward applied). Leave those out of the baseline.
    :param rewards_per_func: ``(N, K)`` float, the raw value of each reward function.
    :param reward_names: the ``K`` reward names, in column order.
    :param reward_weights: ``(K,)`` float, the weight of each reward (``rewards`` is their
        weighted sum), for an estimator that combines the rewards itself.
    :param completion_lengths: ``(N,)`` long, the number of tokens of each completion (what
        ``rlvr_length_penalty`` receives), for a length-weighted baseline such as OPO's.
        Opt-in: an implementation that does not name it does not receive it; ``rlvr audit``
        passes the lengths of its bandit's answers.
    :returns: ``(N,)`` float tensor of advantages.
    """


@hookspec
def rlvr_on_rewards(
    example_indices: list[int],
    rewards: torch.Tensor,
    rewards_per_func: torch.Tensor,
    reward_names: list[str],
    advantages: torch.Tensor,
    valid: torch.Tensor,
    num_generations: int,
    step: int,
    log_metric: Callable[[str, float], None],
    round: int,
) -> None:
    """Observe the scored batch (success rates for a curriculum, statistics).

    Called once per training generation batch after the advantages are computed, with
    the same gathered values on every process. Collect-all. With the rollout pool on
    (``rlvr_select_groups``), once per generation round instead, on that round's groups and
    their advantages within the round (every generated group is seen once, trained or not); with
    partial rollouts (``rlvr_rollout_segments``), on the round's groups whose members all finished,
    when it has any (a group is seen once, when it is finished).

    :param example_indices: ``N`` dataset indices (``rlvr_index``) of the rows.
    :param rewards: ``(N,)`` total reward (NaN where no score).
    :param rewards_per_func: ``(N, K)`` raw reward values.
    :param reward_names: the ``K`` reward names.
    :param advantages: ``(N,)`` the advantages used for the loss.
    :param valid: ``(N,)`` bool, False where the completion has no score.
    :param num_generations: G.
    :param step: the trainer's global step.
    :param log_metric: ``log_metric(name, value)`` adds a scalar to this step's metrics.
    :param round: the generation round: 0 for the prompts the train sampler yielded (with the
        rollout pool, some may have been replaced by ``rlvr_pool_prompts``'s because they were
        skipped before generating); from 1, the rollout pool's extra rounds, whose prompts
        ``rlvr_pool_prompts`` chose. Always 0 without the pool.
    :returns: nothing.
    """


@hookspec(firstresult=True)
def rlvr_pool_prompts(num_prompts: int, step: int, round: int, seed: int) -> Sequence[int]:
    """Order the train prompts for a rollout-pool round, for the prompts the sampler's dataloader did not yield.

    Called only with the rollout pool on (an enabled plugin implements ``rlvr_select_groups``), on
    the plugin that provides the train sampler (``rlvr_train_sampler``; the built-in default
    ``repeat-sampler`` implements it as a uniform draw): once per extra round (``round >= 1``) before
    it generates, and at round 0 when a plugin implements ``rlvr_skip_prompts``; with the same
    arguments on every process. One winner; with the pool on, a sampler plugin that does not
    implement it is refused at start-up (the pool would not know which prompts it may generate).

    An extra round generates for the first ``generation_batch_size / G`` prompts of the order; a
    prompt skipped before generating (``rlvr_skip_prompts``) is replaced by the first later one that
    is neither skipped nor already in the round. The order must be a function of ``(seed, step,
    round)`` and of state that every process holds alike (updated from the gathered values of
    ``rlvr_on_rewards``) and that the checkpoint restores, so that every process, and a resumed run,
    draws the same prompts. The sampler sees the rounds' groups through ``rlvr_on_rewards`` with
    their ``round``.

    :param num_prompts: the number of rows of the train dataset.
    :param step: the trainer's global step.
    :param round: the generation round of this generation batch (0 only for replacements).
    :param seed: the run's seed.
    :returns: distinct dataset positions (indices into the train dataset, as the sampler yields
        them), at least ``generation_batch_size / G`` of them, in the order the round takes them.
    """


@hookspec
def rlvr_skip_prompts(
    prompts: list[int], history: Mapping[int, Sequence[float]], step: int, round: int
) -> list[int] | None:
    """Skip prompts before any completion is generated for them (e.g. those that always score alike).

    Called only with the rollout pool on (an enabled plugin implements ``rlvr_select_groups``), once
    per generation round, before the round generates, with the same arguments on every process.
    Collect-all: a prompt any plugin names is skipped (``pool/skipped_prompts`` counts them). The
    round's prompts that are skipped are replaced by the first candidates not skipped; when the
    candidates run out the round keeps its prompts.

    :param prompts: ``rlvr_index`` of the round's prompts first (``generation_batch_size / G``),
        then of the other train prompts in the order they would replace them (``rlvr_pool_prompts``).
    :param history: per ``rlvr_index`` seen so far (every round, step and resume):
        ``(last valid total reward, streak)``, the streak being how many valid completions in a
        row scored exactly that reward (:class:`rlvr_plugins.rollout_pool.PromptRecord`).
    :param step: the trainer's global step.
    :param round: this generation batch's round, from 0.
    :returns: the ``rlvr_index`` values to skip, or ``None`` for none.
    """


@hookspec
def rlvr_pool_started(prompts: list[int], drawn: list[int], step: int, round: int) -> None:
    """The rollout pool starts a group (``G`` completions) on each of ``prompts``.

    Called only with the rollout pool on, once per generation round, after the round's prompts are
    chosen (the train sampler's batch at round 0, ``rlvr_pool_prompts``'s order later, skipped prompts
    replaced) and before it generates; with the same arguments on every process. Collect-all. Each
    started group reaches ``rlvr_on_rewards`` exactly once, when all its members have finished: in the
    round that started it, or, with partial rollouts (``rlvr_rollout_segments``), at a later round or
    step (a group still unfinished at a checkpoint is continued after the resume; one still unfinished
    when training ends never is). Groups a round continues are not named again. After a resume inside
    a generation batch TRL generates that batch again: its groups are started again (``drawn`` is then
    the batch counted last). A train sampler that learns from the rewards of the groups it
    drew keeps its groups in flight with this hook (``kimi-curriculum``: round 0 consumes the chunk its
    dataloader yielded, and a group is counted whenever it finishes); partial rollouts refuse such a
    sampler that does not implement it.

    :param prompts: ``rlvr_index`` of the started groups' prompts, in the round's order (at round 0
        with partial rollouts, fewer than the sampler's batch: the groups continued take the first places).
    :param drawn: at round 0, ``rlvr_index`` of the whole batch the train sampler's dataloader yielded
        (before skipped prompts were replaced and continued groups took places), which tells a sampler
        the batch it drew; ``[]`` from round 1.
    :param step: the trainer's global step.
    :param round: this generation batch's round, from 0.
    :returns: nothing.
    """


@hookspec(firstresult=True)
def rlvr_select_groups(groups: Sequence[GroupSummary], needed: int, round: int, step: int) -> GroupSelection:
    """Choose the groups a step trains on from the rollout pool, or ask for another generation round.

    Implementing it turns the rollout pool on (``rlvr_plugins.rollout_pool``; without an enabled
    implementation the step is TRL's own, untouched). Called in training only, once per generation
    round of a generation batch (TRL's: one per ``steps_per_generation * num_iterations`` micro-steps),
    after the round's completions are generated, scored, gathered from every process and added to the
    pool, and after ``rlvr_on_rewards`` saw the round; with the same arguments on every process.
    One winner, no default.

    While the answer has ``more=True`` the framework generates another round on
    ``generation_batch_size / G`` prompts drawn by the train sampler's plugin (``rlvr_pool_prompts``,
    fixed by the seed, the step, the round and the sampler's state) and calls the hook again;
    every group stays in the pool meanwhile. The policy must bound its rounds itself. A final answer
    (``more=False``) names exactly ``needed`` distinct groups to train on and the groups that wait;
    the framework drops every other group (``pool/dropped_old`` for groups from earlier steps,
    ``pool/discarded`` for this step's) and recomputes the advantages on the chosen batch, so a
    batch-level estimator sees the batch it trains on. A carried group trains with the behaviour
    log-probs of its own generation (``old_per_token_logps``, computed when it is kept if TRL did not).

    :param groups: every ready group in the pool (:class:`~rlvr_plugins.rollout_pool.GroupSummary`:
        id, prompt index, age in steps, informative, the ``G`` total rewards), in generation order.
    :param needed: the number of groups in the batch (``generation_batch_size / G``).
    :param round: this step's generation round, from 0.
    :param step: the trainer's global step.
    :returns: a :class:`~rlvr_plugins.rollout_pool.GroupSelection`.
    """


@hookspec
def rlvr_state_dict() -> dict[str, Any] | None:
    """Return the plugin's state to save in a checkpoint (JSON-serialisable).

    Called each time the trainer writes a checkpoint. Collect-all; the state is stored
    under the plugin's name. Return ``None`` when the plugin has no state.
    """


@hookspec
def rlvr_load_state_dict(state: dict[str, Any]) -> None:
    """Restore the state returned by :func:`rlvr_state_dict` when a run resumes.

    Called once before training restarts from a checkpoint, only for plugins that saved
    a state. Collect-all.

    :param state: what this plugin's ``rlvr_state_dict`` returned.
    """


@hookspec
def rlvr_reward_exploits(register: Callable[[RewardExploit], None], reward_names: list[str]) -> None:
    """Contribute classes of known hacks against a reward, for ``rlvr audit rewards``.

    Called once per ``rlvr audit rewards``, after the rewards are registered; never during
    training. Collect-all. Call ``register(RewardExploit(reward=..., name=..., build=...))``
    once per class: ``build(row)`` returns the hacking completions for one dataset row. The
    audit applies the class to the audited rows, scores each completion through the reward
    engine (as training does) and reports the share the reward accepts (scores above
    ``RewardExploit.wrong``). The host checks the type, records the plugin, and rejects a
    class for a reward that is not registered and two classes of one name for one reward.
    The generic battery (spraying, several answers, look-alike digits, empty thinking, ...)
    is the core's; this hook adds what only the plugin knows (a judge's prompt injections,
    a sandbox's escapes).

    :param register: the registration callback.
    :param reward_names: the names of every registered reward, in column order.
    :returns: nothing.
    """
