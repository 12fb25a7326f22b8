"""A plugin that breaks its own training run while a checkpoint is being saved.

``rlvr_state_dict`` is called after TRL has written the checkpoint's model, optimizer and
trainer state and before the completeness marker: the worst moment. At the
``RLVR_TEST_KILL_AT_SAVE``-th save it SIGKILLs the process; with
``RLVR_TEST_READ_ONLY_AT_SAVE=N:MOUNT`` it remounts the file system at ``MOUNT`` read-only
at the N-th save (root, a tmpfs of the test's own). Unset: nothing, so the resumed run, with
the same config, runs normally. ``python tests/killing_plugin.py train CONFIG ...`` is
``rlvr`` with the plugin discoverable.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from rlvr_plugins import hookimpl
from rlvr_plugins.plugin import Plugin


class KillWhileSaving(Plugin):
    name = "kill-while-saving"

    def __init__(self, options=None):
        super().__init__(options)
        self.saves = 0

    @hookimpl
    def rlvr_state_dict(self):
        self.saves += 1
        if self.saves == int(os.environ.get("RLVR_TEST_KILL_AT_SAVE", "0")):
            os.kill(os.getpid(), signal.SIGKILL)
        at, _, mount = os.environ.get("RLVR_TEST_READ_ONLY_AT_SAVE", "0:").partition(":")
        if self.saves == int(at):
            subprocess.run(["mount", "-o", "remount,ro", mount], check=True)
        return None


if __name__ == "__main__":
    from rlvr_plugins.cli import main
    from rlvr_plugins.manager import temporary_plugin

    with temporary_plugin(KillWhileSaving):
        sys.exit(main(sys.argv[1:]))
