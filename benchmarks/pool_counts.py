"""What a rollout-pool run paid for what it trained on: completions generated per optimizer step and per
informative group, prompts skipped before generating, held-out accuracy. Read from each run's
``metrics.jsonl`` (the ``pool/*`` metrics) and ``config.yaml``; nothing is run.

    python benchmarks/pool_counts.py RUN_FOLDER [RUN_FOLDER ...] [--label skip-on] [--json OUT]

The ``pool/*`` values of a logged row are TRL's means over the ``logging_steps`` steps it covers, so
a total is the row's mean times the steps it covers (the last row may cover fewer steps).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import yaml


def pool_counts(rows: list[dict], num_generations: int, logging_steps: int) -> dict:
    """Totals over a run from its logged rows.

    With ``g_t`` groups generated, ``z_t`` the zero-variance share of the ``B`` trained groups and ``s_t`` the
    prompts skipped at step ``t`` (``T`` steps)::

        completions per step              = G * Σ g_t / T
        completions per informative group = G * Σ g_t / Σ B (1 - z_t)      (groups trained with a gradient)

    >>> rows = [{"step": 2, "pool/groups_generated": 3.0, "pool/groups_kept": 2.0, "pool/skipped_prompts": 1.0,
    ...          "rlvr/frac_zero_variance_groups": 0.5, "pool/rounds": 1.5, "pool/frac_informative": 0.5}]
    >>> c = pool_counts(rows, num_generations=4, logging_steps=2)
    >>> c["completions_per_step"], c["completions_per_informative_group"], c["skipped_prompts"]
    (12.0, 12.0, 2.0)
    """
    pool = [r for r in rows if "pool/groups_generated" in r]
    steps = groups = informative = skipped = rounds = informative_generated = 0.0
    last = 0
    for row in pool:
        covered = min(logging_steps, row["step"] - last)
        last = row["step"]
        steps += covered
        groups += covered * row["pool/groups_generated"]
        informative += covered * row["pool/groups_kept"] * (1.0 - row["rlvr/frac_zero_variance_groups"])
        informative_generated += covered * row["pool/groups_generated"] * row["pool/frac_informative"]
        skipped += covered * row["pool/skipped_prompts"]
        rounds += covered * row["pool/rounds"]
    return {
        "steps": int(steps),
        "completions": round(num_generations * groups),
        "completions_per_step": round(num_generations * groups / max(steps, 1), 2),
        "completions_per_informative_group": round(num_generations * groups / max(informative, 1e-9), 2),
        "informative_groups_trained": round(informative, 1),
        "share_informative_generated": round(informative_generated / max(groups, 1e-9), 3),
        "rounds_per_step": round(rounds / max(steps, 1), 2),
        "skipped_prompts": round(skipped, 1),
    }


def run_counts(folder: Path) -> dict:
    """:func:`pool_counts` of one run folder, with its seed and held-out accuracy at every evaluation."""
    config = yaml.safe_load((folder / "config.yaml").read_text())
    rows = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines() if line.strip()]
    trainer = config["trainer"]
    held_out = {r["step"]: round(100 * r["eval/accuracy"], 1) for r in rows if "eval/accuracy" in r}
    return {
        "folder": str(folder),
        "seed": config.get("seed"),
        "pool_options": config["plugins"].get("dapo-dynamic-sampling"),
        **pool_counts(rows, int(trainer["num_generations"]), int(trainer.get("logging_steps", 1))),
        "held_out": held_out,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("folders", nargs="+", type=Path)
    p.add_argument("--label", default="")
    p.add_argument("--json", type=Path, help="write the cells here (else print them)")
    args = p.parse_args()
    cells = [{"label": args.label, **run_counts(folder)} for folder in args.folders]
    text = json.dumps(cells, indent=1)
    if args.json:
        args.json.write_text(text + "\n")
    else:
        print(text)


if __name__ == "__main__":
    main()
