"""judge-equivalence: rule-based answer checking with a judge model where the rules cannot decide."""

from .judges import JudgeError, JudgeReplyError, JudgeUnavailable
from .rules import RuleVerdict, rule_verdict

__all__ = ["JudgeError", "JudgeReplyError", "JudgeUnavailable", "RuleVerdict", "rule_verdict"]
