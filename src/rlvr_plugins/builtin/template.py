"""The default template: the dataset's prompt, as written."""

from __future__ import annotations

from dataclasses import dataclass

from .. import hookimpl
from ..plugin import Plugin


class PlainTemplate(Plugin):
    """Returns ``example["prompt"]``; with ``system_prompt`` set, a chat with that system message."""

    name = "plain-template"
    description = "the dataset's prompt unchanged (optionally with a system message); the default template"

    @dataclass
    class Options:
        system_prompt: str | None = None

    @hookimpl
    def rlvr_render_prompt(self, example):
        prompt = example["prompt"]
        if self.options.system_prompt is None:
            return prompt
        messages = prompt if isinstance(prompt, list) else [{"role": "user", "content": prompt}]
        return [{"role": "system", "content": self.options.system_prompt}, *messages]
