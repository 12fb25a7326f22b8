"""``python -m rlvr_plugins.cli``: the ``rlvr`` command."""

import sys

from .app import main

sys.exit(main())
