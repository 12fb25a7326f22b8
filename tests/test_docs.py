"""Meta-tests: the documentation shows every hook's real signature, every plugin and every config key.

Fast: no model, no training. They read ``docs/`` and the plugins' READMEs and compare them
with the code (``rlvr_plugins.hookspecs``, ``manager``, ``config``).
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import subprocess
from pathlib import Path

import pytest

from rlvr_plugins import hookspecs, manager
from rlvr_plugins.train import config, sections, validate

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
HOOKS_MD = DOCS / "hooks.md"
CONFIGURATION_MD = DOCS / "configuration.md"
WRITING_MD = DOCS / "writing-plugins.md"

HOOKS = sorted(name for name, obj in vars(hookspecs).items() if name.startswith("rlvr_") and callable(obj))


def doc_sections(text: str) -> dict[str, str]:
    """``## heading`` → the text up to the next ``##`` heading."""
    parts = re.split(r"^## +(.+?)\s*$", text, flags=re.M)
    return {parts[i].strip(): parts[i + 1] for i in range(1, len(parts), 2)}


def spec_signature(name: str) -> str:
    params = inspect.signature(getattr(hookspecs, name)).parameters
    return f"{name}({', '.join(params)})"


def is_one_winner(name: str) -> bool:
    opts = getattr(getattr(hookspecs, name), f"{hookspecs.PROJECT}_spec")
    return bool(opts.get("firstresult")) and name not in hookspecs.FIRST_RESULT_HOOKS


def calling_mode(name: str) -> str:
    if name in hookspecs.FIRST_RESULT_HOOKS:
        return "first result"
    return "one winner" if is_one_winner(name) else "collect-all"


def test_hookspecs_are_found():
    assert "rlvr_reward_functions" in HOOKS and "rlvr_compute_advantages" in HOOKS


@pytest.mark.parametrize("hook", HOOKS)
def test_every_hook_has_a_section_with_its_exact_signature(hook):
    sections = doc_sections(HOOKS_MD.read_text(encoding="utf-8"))
    assert hook in sections, f"docs/hooks.md has no '## {hook}' section"
    documented = re.findall(rf"^`?({re.escape(hook)}\(.*?\))`?\s*$", sections[hook], flags=re.M)
    assert documented, f"the '## {hook}' section has no signature line '{hook}(...)'"
    assert documented[0] == spec_signature(hook)


@pytest.mark.parametrize("hook", HOOKS)
def test_every_hook_section_states_the_calling_mode(hook):
    section = doc_sections(HOOKS_MD.read_text(encoding="utf-8"))[hook].lower()
    expected = calling_mode(hook)
    assert expected in section, f"docs/hooks.md section {hook} does not say '{expected}'"


def test_no_section_documents_a_hook_that_does_not_exist():
    headings = [h for h in doc_sections(HOOKS_MD.read_text(encoding="utf-8")) if h.startswith("rlvr_")]
    assert sorted(headings) == HOOKS


@pytest.mark.parametrize("hook", HOOKS)
def test_every_hookspec_docstring_says_when_it_is_called_and_its_mode(hook):
    doc = inspect.getdoc(getattr(hookspecs, hook)) or ""
    assert "Called" in doc, f"{hook}: the docstring does not say when it is called ('Called ...')"
    expected = calling_mode(hook)
    assert expected in doc.lower(), f"{hook}: the docstring does not state its calling mode ({expected!r})"


def test_one_winner_hooks_are_firstresult_specs():
    assert sorted(hookspecs.ONE_WINNER_HOOKS) == sorted(h for h in HOOKS if is_one_winner(h))
    for hook, default in manager.DEFAULTS.items():
        assert hook in hookspecs.ONE_WINNER_HOOKS and default in manager.BUILTIN_PLUGINS


def _mentions(text: str, name: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text) is not None


def _docs_text() -> str:
    return "\n".join(p.read_text(encoding="utf-8") for p in sorted(DOCS.rglob("*.md")))


def _plugin_dirs_by_distribution() -> dict[str, Path]:
    """``plugins/<dir>`` (and the docs' example plugin) by the distribution name in its pyproject."""
    found = {}
    for pyproject in [*sorted((REPO / "plugins").glob("*/pyproject.toml")), DOCS / "example-plugin" / "pyproject.toml"]:
        if pyproject.is_file():
            project = pyproject.read_text(encoding="utf-8").partition("[project]")[2]
            name = re.search(r'^name\s*=\s*"([^"]+)"', project, flags=re.M)
            if name:
                found[name.group(1)] = pyproject.parent
    return found


@pytest.mark.parametrize("name", sorted(manager.BUILTIN_PLUGINS))
def test_every_builtin_plugin_is_documented(name):
    assert _mentions(_docs_text(), name), f"built-in plugin {name!r} is not mentioned under docs/"


def test_every_installed_plugin_is_documented():
    """Every plugin ``rlvr plugins`` lists, in docs/ or in its own distribution's README.

    ``manager.discover()`` is the set ``list_plugins()`` lists, without importing every
    plugin (which would import TRL and torch and take seconds).
    """
    docs = _docs_text()
    dirs = _plugin_dirs_by_distribution()
    missing = []
    for name, entry in sorted(manager.discover().items()):
        dist = entry.distribution
        if _mentions(docs, name):
            continue
        if dist == "rlvr-plugins":
            missing.append(f"{name} ({dist}): not mentioned under docs/")
            continue
        folder = dirs.get(dist)
        if folder is None:
            continue  # a third-party distribution installed in this environment, not part of this repository
        readmes = sorted(folder.glob("README*"))
        if not readmes:
            continue  # the plugin's README is not written yet
        if not any(_mentions(r.read_text(encoding="utf-8"), name) for r in readmes):
            missing.append(f"{name} ({dist}): not mentioned under docs/ nor in {folder.relative_to(REPO)}/README")
    assert not missing, "\n".join(missing)


@pytest.mark.parametrize("key", sorted(config.TOP_LEVEL))
def test_every_top_level_config_key_is_documented(key):
    sections = doc_sections(CONFIGURATION_MD.read_text(encoding="utf-8"))
    assert any(re.search(rf"`{re.escape(key)}`", heading) for heading in sections), (
        f"docs/configuration.md has no '## ... `{key}` ...' section"
    )


def _keys(*classes: type) -> set[str]:
    return {f.name for cls in classes for f in dataclasses.fields(cls)}


@pytest.mark.parametrize(
    "section,keys",
    [
        ("model", _keys(sections.ModelSection)),
        ("model.lora", _keys(sections.LoraSection)),
        ("eval", _keys(sections.EvalSection)),
        ("engine", validate.ENGINE_KEYS),
        ("data", _keys(sections.DataSection)),
        ("sft", _keys(sections.SFTExtra)),
        ("data sources", _keys(*sections.SOURCES.values()) | set(sections.SOURCES)),
    ],
)
def test_every_section_key_is_documented(section, keys):
    text = CONFIGURATION_MD.read_text(encoding="utf-8")
    missing = sorted(k for k in keys if f"`{k}" not in text)
    assert not missing, f"docs/configuration.md does not mention {section} key(s) {missing}"


def _python_blocks(path: Path) -> list[tuple[int, str]]:
    text = path.read_text(encoding="utf-8")
    return [
        (text.count("\n", 0, m.start()) + 2, m.group(1))
        for m in re.finditer(r"^```python\n(.*?)^```", text, flags=re.M | re.S)
    ]


@pytest.mark.parametrize("path", [WRITING_MD, HOOKS_MD, DOCS / "architecture.md"], ids=lambda p: p.name)
def test_python_code_blocks_compile(path):
    blocks = _python_blocks(path)
    if path == WRITING_MD:
        assert blocks, "docs/writing-plugins.md has no python code block"
    for line, block in blocks:
        source = block if not block.startswith(" ") else "class _Snippet:\n" + block
        compile(source, f"{path.name}:{line}", "exec")


def test_writing_plugins_walks_through_the_example_plugin():
    text = WRITING_MD.read_text(encoding="utf-8")
    source = (DOCS / "example-plugin" / "src" / "rlvr_no_repeat" / "__init__.py").read_text(encoding="utf-8")
    for needle in ("class NoRepeatPlugin(Plugin):", "class NoRepeatScorer:", "def repeated_share("):
        assert needle in source and needle in text, needle
    assert "pip install -e ./docs/example-plugin" in text and "rewards/no-repeat/mean" in text
    assert "pip install ./docs" not in text


def test_writing_plugins_shows_the_example_pyproject_whole():
    text = WRITING_MD.read_text(encoding="utf-8")
    shown = re.search(r"`docs/example-plugin/pyproject.toml`.*?```toml\n(.*?)```", text, flags=re.S)
    assert shown, "writing-plugins.md shows no pyproject.toml block"
    assert shown.group(1) == (DOCS / "example-plugin" / "pyproject.toml").read_text(encoding="utf-8")
    assert shown.group(1).startswith("[build-system]\n")


def test_readme_says_what_every_make_target_does():
    targets = re.findall(r"^([a-z][a-z-]*):", (REPO / "Makefile").read_text(encoding="utf-8"), flags=re.M)
    assert {"install", "demo", "test", "test-fast", "clean"} <= set(targets)
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert [t for t in targets if f"| `make {t}` |" not in readme] == []


def test_readme_names_its_two_commands_and_where_rlvr_is_after_make_install():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Two commands on a fresh machine", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)```", section, flags=re.S)
    assert block, "the section shows no command block"
    assert [line.split("#")[0].strip() for line in block.group(1).splitlines()] == ["make demo", "make test"]
    assert "`.venv/bin/rlvr`" in section and "`source .venv/bin/activate`" in section


def test_make_demo_sets_what_the_readmes_measured_runs_set():
    """OMP_WAIT_POLICY=PASSIVE, as benchmarks/demo_grid.py sets it for the README's table (and a value in the
    environment wins); it changes no number of a run, only how idle OpenMP threads wait."""
    dry = subprocess.run(
        ["make", "-n", "demo", "VENV=/nonexistent-venv"], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    [line] = [x for x in dry.stdout.splitlines() if "rlvr train configs/demo.yaml" in x]
    assert line == "OMP_WAIT_POLICY=PASSIVE /nonexistent-venv/bin/rlvr train configs/demo.yaml --overwrite"
    grid = (REPO / "benchmarks" / "demo_grid.py").read_text(encoding="utf-8")
    assert 'env.setdefault("OMP_WAIT_POLICY", "PASSIVE")' in grid
