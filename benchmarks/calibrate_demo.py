"""Calibrate the CPU demo with plain TRL: build → SFT cold start → greedy eval → GRPO → greedy eval.

Prints the time of every stage and the held-out greedy accuracy after SFT and after GRPO.
Defaults are the recommended demo settings; every knob has a flag.

    . .venv/bin/activate && python benchmarks/calibrate_demo.py --seed 0
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")

import torch  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from benchkit import load_average, machine_note  # noqa: E402


def _load_demo():
    """Import rlvr_plugins.demo; fall back to loading its files directly if the package is mid-construction."""
    sys.path.insert(0, str(ROOT / "src"))
    try:
        return {name: importlib.import_module(f"rlvr_plugins.demo.{name}") for name in ("tokenizer", "task", "model")}
    except Exception as exc:  # pragma: no cover - only while the rest of the package is broken
        print(f"[warn] importing rlvr_plugins failed ({exc!r}); loading demo modules by path", file=sys.stderr)
        mods = {}
        for name in ("tokenizer", "task", "model"):
            spec = importlib.util.spec_from_file_location(
                f"_demo_{name}", ROOT / "src/rlvr_plugins/demo" / f"{name}.py"
            )
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            mods[name] = mod
        return mods


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=2)
    # task
    p.add_argument("--min-digits", type=int, default=1)
    p.add_argument("--max-digits", type=int, default=3)
    p.add_argument("--difficulty-weights", type=str, default=None, help="comma-separated, one per digit count")
    p.add_argument("--cot", default="columns", choices=["reverse", "carries", "columns", "none"])
    p.add_argument("--pad-operands", type=int, default=0, help="1: zero-pad operands to max-digits (fixed layout)")
    p.add_argument("--n-eval", type=int, default=400)
    p.add_argument("--n-grpo-prompts", type=int, default=4000, help="training prompts available to GRPO")
    # model
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--intermediate", type=int, default=512)
    # SFT
    p.add_argument("--sft-examples", type=int, default=9600, help="= 300 steps at batch 32, 1 epoch")
    p.add_argument("--sft-epochs", type=float, default=1.0)
    p.add_argument("--sft-lr", type=float, default=3e-3)
    p.add_argument("--sft-batch", type=int, default=32)
    p.add_argument("--sft-warmup", type=float, default=0.05, help="warmup ratio")
    p.add_argument("--sft-scheduler", default="constant_with_warmup")
    p.add_argument("--sft-eval-every", type=int, default=0, help="greedy eval every N SFT steps (0: off)")
    # GRPO
    p.add_argument("--grpo-steps", type=int, default=200)
    p.add_argument("--grpo-lr", type=float, default=2e-4)
    p.add_argument("--prompts-per-step", type=int, default=16)
    p.add_argument("--num-generations", type=int, default=4)
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--beta", type=float, default=0.0)
    p.add_argument("--loss-type", default="dapo")
    p.add_argument("--scale-rewards", default="group")
    p.add_argument("--num-iterations", type=int, default=1)
    p.add_argument("--grpo-scheduler", default="constant")
    p.add_argument("--max-completion-length", type=int, default=0, help="0: longest solution + 2")
    p.add_argument("--format-weight", type=float, default=0.0, help="weight of the format reward (0 = accuracy only)")
    p.add_argument("--eval-every", type=int, default=0, help="greedy eval every N GRPO steps (0: off; costs time)")
    p.add_argument("--eval-batch", type=int, default=200)
    p.add_argument("--skip-grpo", action="store_true")
    p.add_argument("--save-sft", type=str, default=None, help="save the SFT model here (calibration shortcut)")
    p.add_argument("--load-sft", type=str, default=None, help="skip SFT and load this saved SFT model instead")
    p.add_argument("--json", type=str, default=None, help="write a JSON summary here")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    t_start = time.perf_counter()
    load_start = load_average()
    torch.set_num_threads(args.threads)
    demo = _load_demo()

    import transformers
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer, SFTConfig, SFTTrainer

    transformers.logging.set_verbosity_error()
    import datasets

    datasets.disable_progress_bars()
    transformers.set_seed(args.seed)
    task = demo["task"]
    timings, results = {}, {}

    # ---------------------------------------------------------------- build
    t0 = time.perf_counter()
    task_opts = {
        "min_digits": args.min_digits,
        "max_digits": args.max_digits,
        "cot": args.cot,
        "pad_operands": bool(args.pad_operands),
    }
    if args.difficulty_weights:
        task_opts["difficulty_weights"] = [float(x) for x in args.difficulty_weights.split(",")]
    tok = demo["tokenizer"].build_char_tokenizer()
    train_rows, eval_rows = task.split_train_eval(
        args.sft_examples + args.n_grpo_prompts, args.n_eval, args.seed, **task_opts
    )
    sft_rows, grpo_rows = train_rows[: args.sft_examples], train_rows[args.sft_examples :]
    model = demo["model"].build_tiny_model(
        tok,
        seed=args.seed,
        hidden_size=args.hidden,
        num_hidden_layers=args.layers,
        num_attention_heads=args.heads,
        num_key_value_heads=args.heads,
        head_dim=args.hidden // args.heads,
        intermediate_size=args.intermediate,
    )
    n_params = sum(p.numel() for p in model.parameters())
    longest = max(len(tok(r["solution"], add_special_tokens=False)["input_ids"]) for r in train_rows + eval_rows)
    max_completion = args.max_completion_length or longest + 2  # + <eos> + one spare
    longest_prompt = max(len(tok(r["prompt"])["input_ids"]) for r in train_rows + eval_rows)
    timings["build"] = time.perf_counter() - t0
    print(
        f"[build] {n_params / 1e6:.2f}M params, vocab {len(tok)}, longest solution {longest} tokens, "
        f"max_completion_length {max_completion}, {timings['build']:.1f}s",
        flush=True,
    )
    print(f"[build] example: {eval_rows[0]['prompt']}{eval_rows[0]['solution']}", flush=True)

    prompts = [r["prompt"] for r in eval_rows]

    def evaluate(tag):
        t = time.perf_counter()
        from rlvr_plugins.train.sampling import SamplingOptions, sample

        greedy = SamplingOptions(temperature=0.0, max_new_tokens=max_completion, batch_size=args.eval_batch)
        outs = [s[0].text for s in sample(prompts, greedy, model=model, tokenizer=tok, desc=None)]
        correct = [task.extract_answer(o) == r["answer"] for o, r in zip(outs, eval_rows)]
        fmt = [task.is_well_formed(o, args.cot) for o in outs]
        by_d = {}
        for c, r in zip(correct, eval_rows):
            by_d.setdefault(r["difficulty"], []).append(c)
        acc = 100.0 * sum(correct) / len(correct)
        dt = time.perf_counter() - t
        per = " ".join(f"d{d}:{100 * sum(v) / len(v):.0f}%" for d, v in sorted(by_d.items()))
        print(f"[eval {tag}] acc {acc:.1f}%  format {100 * sum(fmt) / len(fmt):.0f}%  ({per})  {dt:.1f}s", flush=True)
        return acc, dt, {d: 100 * sum(v) / len(v) for d, v in by_d.items()}

    # ---------------------------------------------------------------- SFT
    t0 = time.perf_counter()
    sft_ds = Dataset.from_list([{"prompt": r["prompt"], "completion": r["solution"]} for r in sft_rows])
    sft_cfg = SFTConfig(
        output_dir=f"/tmp/calibrate_demo/sft-{os.getpid()}",
        num_train_epochs=args.sft_epochs,
        per_device_train_batch_size=args.sft_batch,
        learning_rate=args.sft_lr,
        lr_scheduler_type=args.sft_scheduler,
        warmup_steps=args.sft_warmup,
        weight_decay=0.0,
        completion_only_loss=True,
        max_length=longest_prompt + max_completion,
        bf16=False,
        gradient_checkpointing=False,
        use_cpu=True,
        logging_steps=25,
        save_strategy="no",
        report_to="none",
        seed=args.seed,
        data_seed=args.seed,
        dataloader_num_workers=0,
        disable_tqdm=True,
    )

    class SFTEval(TrainerCallback):
        def on_step_end(self, a, state, control, **kw):
            if args.sft_eval_every and state.global_step % args.sft_eval_every == 0:
                evaluate(f"SFT step {state.global_step}")

    if args.load_sft:
        model = transformers.AutoModelForCausalLM.from_pretrained(args.load_sft)
        print(f"[sft] loaded {args.load_sft}", flush=True)
    else:
        sft = SFTTrainer(model=model, args=sft_cfg, train_dataset=sft_ds, processing_class=tok, callbacks=[SFTEval()])
        sft.train()
        losses = [(h["step"], round(h["loss"], 3)) for h in sft.state.log_history if "loss" in h]
        model = sft.model
        if args.save_sft:
            model.save_pretrained(args.save_sft)
        timings["sft"] = time.perf_counter() - t0
        print(f"[sft] {sft.state.global_step} steps, loss {losses}, {timings['sft']:.1f}s", flush=True)
    results["sft_acc"], timings["eval_sft"], results["sft_by_difficulty"] = evaluate("after SFT")

    # ---------------------------------------------------------------- GRPO
    if not args.skip_grpo:

        def accuracy_reward(completions, answer, **kwargs):
            return [1.0 if task.extract_answer(c) == a else 0.0 for c, a in zip(completions, answer)]

        def format_reward(completions, **kwargs):
            return [1.0 if task.is_well_formed(c, args.cot) else 0.0 for c in completions]

        reward_funcs, reward_weights = [accuracy_reward], [1.0]
        if args.format_weight > 0:
            reward_funcs.append(format_reward)
            reward_weights.append(args.format_weight)

        class Progress(TrainerCallback):
            def __init__(self):
                self.t0 = time.perf_counter()

            def on_log(self, a, state, control, logs=None, **kw):
                if logs and "reward" in logs:
                    acc_key = "rewards/accuracy_reward/mean"
                    print(
                        f"  [grpo step {state.global_step:4d}] t={time.perf_counter() - self.t0:6.1f}s "
                        f"acc_reward {logs.get(acc_key, float('nan')):.3f} "
                        f"zero_std {logs.get('frac_reward_zero_std', float('nan')):.2f} "
                        f"len {logs.get('completions/mean_length', float('nan')):.1f} "
                        f"clip {logs.get('completions/clipped_ratio', float('nan')):.2f} "
                        f"entropy {logs.get('entropy', float('nan')):.3f}",
                        flush=True,
                    )

            def on_step_end(self, a, state, control, **kw):
                if args.eval_every and state.global_step % args.eval_every == 0 and state.global_step < args.grpo_steps:
                    evaluate(f"GRPO step {state.global_step}")

        t0 = time.perf_counter()
        grpo_ds = Dataset.from_list([{"prompt": r["prompt"], "answer": r["answer"]} for r in grpo_rows])
        grpo_cfg = GRPOConfig(
            output_dir=f"/tmp/calibrate_demo/grpo-{os.getpid()}",
            max_steps=args.grpo_steps,
            learning_rate=args.grpo_lr,
            lr_scheduler_type=args.grpo_scheduler,
            warmup_steps=0,
            weight_decay=0.0,
            per_device_train_batch_size=args.prompts_per_step * args.num_generations,
            gradient_accumulation_steps=1,
            num_generations=args.num_generations,
            num_iterations=args.num_iterations,
            max_completion_length=max_completion,
            temperature=args.temperature,
            beta=args.beta,
            loss_type=args.loss_type,
            scale_rewards=args.scale_rewards,
            reward_weights=reward_weights,
            bf16=False,
            gradient_checkpointing=False,
            use_cpu=True,
            logging_steps=10,
            save_strategy="no",
            report_to="none",
            seed=args.seed,
            data_seed=args.seed,
            disable_tqdm=True,
            log_completions=False,
        )
        grpo = GRPOTrainer(
            model=model,
            reward_funcs=reward_funcs,
            args=grpo_cfg,
            train_dataset=grpo_ds,
            processing_class=tok,
            callbacks=[Progress()],
        )
        grpo.train()
        model = grpo.model
        timings["grpo"] = time.perf_counter() - t0
        print(
            f"[grpo] {grpo.state.global_step} steps, {timings['grpo']:.1f}s "
            f"({timings['grpo'] / max(1, grpo.state.global_step):.2f}s/step)",
            flush=True,
        )
        results["grpo_acc"], timings["eval_grpo"], results["grpo_by_difficulty"] = evaluate("after GRPO")
        results["gain"] = results["grpo_acc"] - results["sft_acc"]

    timings["total"] = time.perf_counter() - t_start
    machine = machine_note(load_start, load_average())
    print(f"[load] {machine['load_average_start']} at start, {machine['load_average_end']} at end", flush=True)
    print("[timings] " + "  ".join(f"{k} {v:.1f}s" for k, v in timings.items()), flush=True)
    print(
        "[result] " + json.dumps({k: (round(v, 1) if isinstance(v, float) else v) for k, v in results.items()}),
        flush=True,
    )
    if args.json:
        Path(args.json).write_text(
            json.dumps({"args": vars(args), "machine": machine, "timings": timings, "results": results}, indent=2)
        )
    return results


if __name__ == "__main__":
    main()
