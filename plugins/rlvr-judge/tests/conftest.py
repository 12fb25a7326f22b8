"""A stub OpenAI-compatible judge on loopback, a dead port, and a tiny local judge model with a known verdict."""

from __future__ import annotations

import json
import math
import re
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

EQUIVALENT_PAIRS = {("0.5 metres", "50 cm"), ("one half", "\\frac{1}{2}"), ("five", "5 apples")}


def table_verdict(prompt: str) -> str:
    """The stub judge's rule: EQUIVALENT exactly for the pairs in ``EQUIVALENT_PAIRS``."""
    answer = re.search(r"^Final answer: (.*)$", prompt, re.MULTILINE).group(1)
    reference = re.search(r"^Reference answer: (.*)$", prompt, re.MULTILINE).group(1)
    return "EQUIVALENT" if (answer, reference) in EQUIVALENT_PAIRS else "NOT EQUIVALENT"


def chat_reply(content) -> bytes:
    return json.dumps(
        {
            "id": "x",
            "object": "chat.completion",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}}],
        }
    ).encode()


class StubJudge:
    """``ThreadingHTTPServer`` on 127.0.0.1 (random port) answering ``POST /v1/chat/completions``.

    ``script`` is a list of behaviours consumed one per request, then ``default``:
    ``("verdict",)`` replies by ``table_verdict``; ``("content", text)``; ``("status", code)``;
    ``("sleep", seconds)`` then the table verdict; ``("raw", bytes)`` a 200 with that body.
    ``requests`` records every request body (JSON) with its headers.
    """

    def __init__(self):
        self.script: list[tuple] = []
        self.default: tuple = ("verdict",)
        self.requests: list[dict] = []
        self.lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with stub.lock:
                    stub.requests.append({"path": self.path, "body": body, "headers": dict(self.headers)})
                    action = stub.script.pop(0) if stub.script else stub.default
                prompt = body["messages"][0]["content"]
                if action[0] == "sleep":
                    time.sleep(action[1])
                    action = ("verdict",)
                if action[0] == "status":
                    self.send_response(action[1])
                    self.end_headers()
                    self.wfile.write(b'{"error": "stub"}')
                    return
                payload = {
                    "verdict": lambda: chat_reply("Compared.\n" + table_verdict(prompt)),
                    "content": lambda: chat_reply(action[1]),
                    "raw": lambda: action[1],
                }[action[0]]()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                try:
                    self.wfile.write(payload)
                except OSError:
                    pass

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    @property
    def count(self) -> int:
        return len(self.requests)

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def stub():
    server = StubJudge()
    yield server
    server.close()


@pytest.fixture
def dead_url():
    """A loopback URL where nothing listens (connection refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def save_tiny_judge(path, yes_logit: float, no_logit: float) -> str:
    """A tiny Phi causal LM (Phi's lm_head has a bias) whose next-token logits are 0 except
    ``yes_logit`` for ``y`` and ``no_logit`` for ``n`` whatever the input (lm_head weights zeroed),
    saved with the demo's character tokenizer; ``p_yes = sigmoid(yes_logit - no_logit)``."""
    import torch
    from transformers import PhiConfig, PhiForCausalLM

    from rlvr_plugins.testing import char_tokenizer

    tokenizer = char_tokenizer()
    config = PhiConfig(
        vocab_size=len(tokenizer),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        max_position_embeddings=1024,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(0)
    model = PhiForCausalLM(config)
    with torch.no_grad():
        model.lm_head.weight.zero_()
        model.lm_head.bias.zero_()
        model.lm_head.bias[tokenizer.convert_tokens_to_ids("y")] = yes_logit
        model.lm_head.bias[tokenizer.convert_tokens_to_ids("n")] = no_logit
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return str(path)


@pytest.fixture(scope="session")
def tiny_judges(tmp_path_factory):
    """Saved tiny judges: ``yes`` (p_yes = sigmoid(4)), ``no`` (sigmoid(-4)), ``three_to_one`` (p_yes = 0.75)."""
    root = tmp_path_factory.mktemp("judges")
    return {
        "yes": save_tiny_judge(root / "yes", 4.0, 0.0),
        "no": save_tiny_judge(root / "no", 0.0, 4.0),
        "three_to_one": save_tiny_judge(root / "three", math.log(3.0), 0.0),
    }


@pytest.fixture(autouse=True)
def fresh_verdict_caches():
    """Each test starts as a fresh worker would: no verdict in memory."""
    from rlvr_judge import plugins

    plugins._CACHES.clear()
    plugins._FAILURES.clear()
    yield
    plugins._CACHES.clear()
    plugins._FAILURES.clear()


def make_scorer(**options):
    """The scorer ``judge-equivalence`` registers for these options (parsed as from a config)."""
    from rlvr_judge.plugins import JudgeEquivalencePlugin, build_scorer

    return build_scorer(JudgeEquivalencePlugin.parse_options({"model": "judge-model", **options}))
