"""docs/architecture.md lists every module of the package with its layer."""

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "src" / "rlvr_plugins"
LAYERS = {"core", "TRL glue", "train", "lab", "cli", "demo", "testing"}


def tree_block() -> str:
    text = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text.split("## The layers", 1)[1]
    return section.split("```", 2)[1]


def listed() -> tuple[set[str], set[str]]:
    """Files (``train/run.py``) and whole folders (``demo/``) named in the tree."""
    names = set(re.findall(r"(?<![\w/])((?:[a-z_]+/)*[a-z_]+\.py|[a-z_]+/)(?=[\s,]|$)", tree_block(), re.M))
    return {n for n in names if n.endswith(".py")}, {n for n in names if n.endswith("/")}


def test_every_module_is_listed_with_its_layer():
    files, folders = listed()
    modules = sorted(str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)
    missing = [
        m
        for m in modules
        if m not in files
        and not any(m.startswith(f) for f in folders)
        and not (m.endswith("__init__.py") and m != "__init__.py")
    ]
    assert not missing, f"docs/architecture.md does not list: {missing}"
    stale = [f for f in files if not (PACKAGE / f).is_file()] + [f for f in folders if not (PACKAGE / f).is_dir()]
    assert not stale, f"docs/architecture.md lists modules that do not exist: {stale}"


def test_every_line_of_the_tree_names_a_layer():
    for line in tree_block().strip().splitlines()[1:]:
        if ".py" in line.split()[-1] or line.rstrip().endswith(","):
            continue  # a line of names continued on the next
        assert any(f" {layer} " in f" {line} " for layer in LAYERS), line
