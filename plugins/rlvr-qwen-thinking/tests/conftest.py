"""The tiny model of these tests: ``rlvr_plugins.testing.tiny_model`` with room for 256 positions
(``tokenizer`` and the other shared fixtures come from rlvr-plugins' pytest plugin)."""

from __future__ import annotations

import pytest


@pytest.fixture
def tiny_model(tokenizer):
    from rlvr_plugins.testing import tiny_model

    return tiny_model(tokenizer, max_position_embeddings=256)
