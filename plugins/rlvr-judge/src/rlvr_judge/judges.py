"""The judge backends: an OpenAI-compatible HTTP endpoint, or a local transformers causal LM.

A backend answers one question, ``judge(prompt) -> bool`` (equivalent or not), or raises a
:class:`JudgeError`. It never returns a guess: a timeout, a refused connection, a server
error after the retries, or a reply that is not a verdict raise, so the reward engine masks
the completion (no score, advantage 0, counted) instead of scoring it 0.
"""

from __future__ import annotations

import http.client
import ipaddress
import json
import math
import os
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

HTTP_TEMPLATE = (
    "You are grading a final answer against a reference answer.\n"
    "{question_block}"
    "Reference answer: {reference}\n"
    "Final answer: {answer}\n\n"
    "Are the two answers equivalent: the same value, expression, set or statement, allowing for "
    "different notation, equivalent forms and units written in words or converted? "
    "Reason briefly if you need to, then end your reply with one last line that is exactly "
    "EQUIVALENT or NOT EQUIVALENT."
)
LOCAL_TEMPLATE = (
    "You are grading a final answer against a reference answer.\n"
    "{question_block}"
    "Reference answer: {reference}\n"
    "Final answer: {answer}\n"
    "Are the two answers equivalent (same value, allowing different notation and units)? "
    "Reply with yes or no.\n"
)
QUESTION_BLOCK = "Question: {question}\n"
PLACEHOLDERS = ("answer", "reference", "question", "question_block")
RETRY_STATUS = frozenset({408, 429, 500, 502, 503, 504})
VERDICTS = {"EQUIVALENT": True, "NOT EQUIVALENT": False}


class JudgeError(RuntimeError):
    """The judge could not give a verdict; the reward engine masks the completion."""


class JudgeUnavailable(JudgeError):
    """No usable reply: timeout, connection refused or reset, HTTP error (after the retries)."""


class JudgeReplyError(JudgeError):
    """A reply came back but holds no verdict (not JSON, no message, no verdict line, NaN logits)."""


def render_prompt(template: str, *, answer: str, reference: str, question: str | None) -> str:
    """Fill ``{answer}``, ``{reference}``, ``{question}`` and ``{question_block}`` (``"Question: …\\n"``,
    or ``""`` when no question is given). Literal braces in a template are written ``{{ }}``."""
    block = QUESTION_BLOCK.format(question=question) if question is not None else ""
    return template.format(answer=answer, reference=reference, question=question or "", question_block=block)


def check_template(template: str, include_question: bool) -> list[str]:
    """Problems with a template: unknown placeholders, a missing answer or reference, a missing question."""
    import string

    try:
        fields = {f for _, f, _, _ in string.Formatter().parse(template) if f is not None}
    except ValueError as exc:
        return [f"template is not a valid format string ({exc}); write literal braces as {{{{ }}}}"]
    problems = [
        f"template uses unknown placeholder {{{f}}}; known: {', '.join(PLACEHOLDERS)}"
        for f in sorted(fields - set(PLACEHOLDERS))
    ]
    problems += [f"template must contain {{{f}}}" for f in ("answer", "reference") if f not in fields]
    if include_question and not fields & {"question", "question_block"}:
        problems.append("include_question is true but the template has neither {question} nor {question_block}")
    return problems


def parse_verdict(content: str) -> bool:
    """The verdict in a reply: its last non-empty line, which must read ``EQUIVALENT`` or ``NOT
    EQUIVALENT`` (case-insensitive; surrounding ``*`` and one final period allowed).

    >>> parse_verdict("The units differ by a factor of 100.\\n**NOT EQUIVALENT**")
    False
    """
    lines = [line.strip() for line in content.splitlines() if line.strip()]
    if not lines:
        raise JudgeReplyError("the judge's reply is empty")
    last = lines[-1].strip("*").strip()
    last = last[:-1].rstrip() if last.endswith(".") else last
    verdict = VERDICTS.get(" ".join(last.upper().split()))
    if verdict is None:
        raise JudgeReplyError(f"the judge's last line is not EQUIVALENT or NOT EQUIVALENT: {lines[-1][:80]!r}")
    return verdict


def _is_loopback(url: str) -> bool:
    host = urllib.parse.urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class HttpJudge:
    """An OpenAI-compatible ``POST {base_url}/chat/completions`` (vLLM, SGLang, TGI, OpenAI).

    Each attempt waits at most ``timeout_s`` per socket operation; a timeout, a refused or
    reset connection and HTTP 408/429/5xx are retried up to ``retries`` times with backoff
    ``backoff_s * 2**k``, never past ``budget_s`` from the first attempt. Other HTTP errors
    (401, 404: a wrong key or model name) and malformed replies are not retried (at
    temperature 0 the same request gets the same reply). The API key is read from the
    environment variable ``api_key_env`` when the request is made (workers inherit the
    trainer's environment when they start), so it never sits in a config or a pickle.
    Loopback URLs bypass any ``http_proxy`` of the environment.
    """

    base_url: str
    model: str
    api_key_env: str | None = None
    timeout_s: float = 3.0
    retries: int = 2
    backoff_s: float = 0.25
    budget_s: float = 5.0
    max_tokens: int = 512

    def judge(self, prompt: str) -> bool:
        return parse_verdict(self.complete(prompt))

    def complete(self, prompt: str) -> str:
        """The reply's text, after the retries; raises :class:`JudgeError`."""
        body = json.dumps(
            {
                "model": self.model,
                "messages": [{"role": "user", "content": prompt}],
                "max_tokens": self.max_tokens,
                "temperature": 0,
            }
        ).encode()
        request = urllib.request.Request(
            self.base_url.rstrip("/") + "/chat/completions", data=body, headers=self._headers(), method="POST"
        )
        started, errors = time.monotonic(), []
        for attempt in range(self.retries + 1):
            if attempt:
                pause = self.backoff_s * 2 ** (attempt - 1)
                if time.monotonic() - started + pause + 0.05 >= self.budget_s:
                    break
                time.sleep(pause)
            remaining = self.budget_s - (time.monotonic() - started)
            try:
                return _reply_text(self._post(request, max(0.05, min(self.timeout_s, remaining))))
            except _Transient as exc:
                errors.append(str(exc))
        raise JudgeUnavailable(
            f"judge at {self.base_url} gave no reply after {len(errors)} attempt(s) "
            f"in {time.monotonic() - started:.1f}s: " + "; ".join(errors)
        )

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        if self.api_key_env:
            key = os.environ.get(self.api_key_env)
            if not key:
                raise JudgeError(
                    f"environment variable {self.api_key_env} (api_key_env) is not set in the "
                    "reward worker; set it before the run starts"
                )
            headers["Authorization"] = f"Bearer {key}"
        return headers

    def _post(self, request: urllib.request.Request, timeout: float) -> bytes:
        handlers = [urllib.request.ProxyHandler({})] if _is_loopback(self.base_url) else []
        opener = urllib.request.build_opener(*handlers)
        try:
            with opener.open(request, timeout=timeout) as response:
                return response.read()
        except urllib.error.HTTPError as exc:
            detail = f"HTTP {exc.code} {exc.reason}"
            if exc.code in RETRY_STATUS:
                raise _Transient(detail) from exc
            raise JudgeUnavailable(
                f"judge at {self.base_url} refused the request: {detail}: {exc.read()[:200]!r}"
            ) from exc
        except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
            reason = getattr(exc, "reason", exc)
            kind = "timeout" if isinstance(reason, (TimeoutError, socket.timeout)) else type(reason).__name__
            raise _Transient(f"{kind}: {reason}") from exc


class _Transient(Exception):
    """One failed attempt worth retrying."""


def _reply_text(raw: bytes) -> str:
    try:
        content = json.loads(raw)["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise JudgeReplyError(f"malformed chat-completions reply ({type(exc).__name__}): {raw[:120]!r}") from exc
    if not isinstance(content, str):
        raise JudgeReplyError(f"malformed chat-completions reply: content is {type(content).__name__}")
    return content


_LOADED: dict[tuple[str, str], tuple[Any, Any]] = {}


@dataclass(frozen=True)
class LocalJudge:
    """A transformers causal LM that reads the verdict from its next-token logits.

    The prompt (through the tokenizer's chat template when it has one, with the generation
    prompt added) is run once; with ``l_yes`` and ``l_no`` the last position's logits of the
    first token of ``yes_token`` and of ``no_token``,
    ``p_yes = exp(l_yes) / (exp(l_yes) + exp(l_no)) = sigmoid(l_yes - l_no)``, and the answer
    is equivalent when ``p_yes >= threshold``. No text is generated or parsed. The model and
    tokenizer are loaded once per process (module-level cache) on ``device``.
    """

    model: str
    device: str = "cpu"
    threshold: float = 0.5
    yes_token: str = "yes"
    no_token: str = "no"
    max_prompt_tokens: int = 2048

    def judge(self, prompt: str) -> bool:
        return self.p_yes(prompt) >= self.threshold

    def p_yes(self, prompt: str) -> float:
        import torch

        tokenizer, model = self.load()
        if getattr(tokenizer, "chat_template", None):
            prompt = tokenizer.apply_chat_template(
                [{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True
            )
        ids = tokenizer(prompt, return_tensors="pt")["input_ids"][:, -self.max_prompt_tokens :]
        yes, no = self.candidate_ids(tokenizer)
        with torch.no_grad():
            logits = model(input_ids=ids.to(model.device)).logits[0, -1]
        pair = logits[[yes, no]].double()
        p = torch.softmax(pair, dim=0)[0].item()
        if not math.isfinite(p):
            raise JudgeReplyError(f"local judge {self.model}: non-finite logits {pair.tolist()}")
        return p

    def candidate_ids(self, tokenizer) -> tuple[int, int]:
        ids = [tokenizer(text, add_special_tokens=False)["input_ids"] for text in (self.yes_token, self.no_token)]
        if not ids[0] or not ids[1] or ids[0][0] == ids[1][0]:
            raise JudgeError(
                f"local judge {self.model}: yes_token {self.yes_token!r} and no_token "
                f"{self.no_token!r} must start with different tokens, got {ids}"
            )
        return ids[0][0], ids[1][0]

    def load(self) -> tuple[Any, Any]:
        """(tokenizer, model), loaded on the first call in this process."""
        key = (self.model, self.device)
        if key not in _LOADED:
            from transformers import AutoModelForCausalLM, AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(self.model)
            model = AutoModelForCausalLM.from_pretrained(self.model).to(self.device).eval()
            self.candidate_ids(tokenizer)
            _LOADED[key] = (tokenizer, model)
        return _LOADED[key]
