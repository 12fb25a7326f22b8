import time
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlvr_r1.language import TARGET_SCRIPTS, count_words, language_consistency, script_of, thinking_text


@pytest.mark.parametrize(
    "text,target,expected",
    [
        ("Let us add the numbers", "en", 1.0),
        ("我们把数字加起来", "zh", 1.0),
        ("我们把数字加起来", "en", 0.0),
        ("hello world foo 中", "en", 0.75),
        ("hello world foo 中", "zh", 0.25),
        ("First 我们 add", "en", 0.5),
        ("So 答案是 five", "zh", 0.6),
        ("привет мир and", "ru", 2 / 3),
        ("привет мир and", "en", 1 / 3),
        ("すごい 日本", "ja", 1.0),
        ("すごい 日本", "zh", 0.4),
        ("한국어 text", "ko", 0.75),
        ("ｈｅｌｌｏ world", "en", 1.0),
        ("naïve café", "en", 1.0),
        ("don't stop", "en", 1.0),
    ],
)
def test_shares(text, target, expected):
    assert language_consistency(text, target) == pytest.approx(expected)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   \n\t",
        "12 + 34 = 46",
        r"\frac{1}{2} + \sqrt{3} \boxed{7}",
        "$x + y = 3$",
        r"\[ a^2 + b^2 = c^2 \]",
        "π ≈ 3.14159 … !!!",
    ],
)
def test_no_countable_words_scores_zero(text):
    assert language_consistency(text, "en") == 0.0
    assert language_consistency(text, "zh") == 0.0


def test_numbers_latex_and_math_are_neutral():
    text = r"所以 $x=2$ 和 \frac{3}{4} 是 12 answer"
    assert count_words(text) == {"Han": 4, "Latin": 1}
    assert language_consistency(text, "zh") == pytest.approx(0.8)


def test_unclosed_dollar_is_plain_text():
    assert count_words("it costs $5 and more") == {"Latin": 4}
    assert count_words("cost $5\nand $6 later") == {"Latin": 3}


def test_escaped_dollar_is_not_math():
    assert count_words(r"pay \$5 and \$6 now") == {"Latin": 3}


def test_word_counts_by_script():
    assert count_words("abc 中文 ひらがな カタカナ 한국") == {
        "Latin": 1,
        "Han": 2,
        "Hiragana": 4,
        "Katakana": 4,
        "Hangul": 2,
    }
    assert count_words("mixedСлово") == {"Latin": 1, "Cyrillic": 1}
    assert count_words("α is small but αβγ is a word") == {"Latin": 6, "Greek": 1}


def test_script_of():
    assert script_of("a") == "Latin"
    assert script_of("中") == "Han"
    assert script_of("ア") == "Katakana"
    assert script_of("я") == "Cyrillic"
    assert script_of("7") is None
    assert script_of("+") is None


def test_targets_table():
    assert TARGET_SCRIPTS["en"] == {"Latin"}
    assert TARGET_SCRIPTS["zh"] == {"Han"}
    assert TARGET_SCRIPTS["ja"] == {"Han", "Hiragana", "Katakana"}
    with pytest.raises(ValueError):
        language_consistency("hello", "xx")


@pytest.mark.parametrize(
    "completion,opened,expected",
    [
        ("<think>we add</think><answer>5</answer>", False, "we add"),
        ("we add</think><answer>5</answer>", True, "we add"),
        ("<answer>5</answer>", False, ""),
        ("<think>unfinished", False, "unfinished"),
    ],
)
def test_thinking_text(completion, opened, expected):
    assert thinking_text(completion, think_opened=opened) == expected


def test_language_of_thinking_only():
    completion = "<think>先 add 再 check</think><answer>全是中文答案</answer>"
    assert language_consistency(thinking_text(completion), "en") == pytest.approx(0.5)


def test_large_inputs_are_linear():
    start = time.perf_counter()
    assert language_consistency("\\[" * 150_000) == 0.0
    assert language_consistency("$" * 300_000) == 0.0
    assert language_consistency("word " * 400_000) == 1.0
    assert time.perf_counter() - start < 5.0


@settings(max_examples=300, deadline=None)
@given(st.text(), st.sampled_from(sorted(TARGET_SCRIPTS)))
def test_never_raises_and_in_range(text, target):
    assert 0.0 <= language_consistency(text, target) <= 1.0
    assert isinstance(thinking_text(text), str)


# --- words inside \text{} in math are language -------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        (r"\(\text{我们计算两个数的和}\) so", {"Han": 9, "Latin": 1}),
        (r"$\text{我们}$ and $\textbf{计算}$", {"Han": 4, "Latin": 1}),
        (r"Let $v = \mathrm{speed} \cdot \operatorname{dist}$ hold", {"Latin": 2}),
        (r"$x + \text{one \textbf{two} three} + \frac{\mbox{four}}{y}$", {"Latin": 4}),
        (r"$$\text{a \{b\} c}$$ \[\emph{d}\]", {"Latin": 4}),
        (r"$\text{中文 never closed$", {"Han": 2, "Latin": 2}),
    ],
)
def test_text_commands_inside_math_count_as_language(text, expected):
    assert count_words(text) == Counter(expected)


def test_a_chinese_chain_of_thought_hidden_in_text_is_not_english():
    thinking = r"\(\text{我们先计算两个数的和然后再乘以三}\) ok"
    assert language_consistency(thinking, "en") == pytest.approx(1 / 17)
    assert language_consistency(thinking, "zh") == pytest.approx(16 / 17)


# --- letters of scripts other than Latin and Greek are language anywhere in math ----------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ("OK $我们计算两个数$", {"Han": 7, "Latin": 1}),
        (r"OK $\mathrm{我们计算}$ \(\operatorname{两个}\)", {"Han": 6, "Latin": 1}),
        (r"OK $x \tag{我们} \label{计算}$", {"Han": 4, "Latin": 1}),
        ("OK $$\n我们\n$$ \\[计算\\]", {"Han": 4, "Latin": 1}),
        (r"OK $\text{ab} привет + y$", {"Cyrillic": 1, "Latin": 2}),
        (r"So $x^2 + \alpha\beta = \pi r$ holds", {"Latin": 2}),
    ],
)
def test_non_latin_letters_inside_math_count_as_language(text, expected):
    assert count_words(text) == Counter(expected)


def test_a_chinese_chain_of_thought_hidden_in_math_is_not_english():
    thinking = "$我们先计算两个数的和然后再乘以三$ ok \\(\\mathrm{得到答案}\\)"
    assert language_consistency(thinking, "en") == pytest.approx(1 / 21)


def test_language_is_linear_on_a_megabyte_of_adversarial_input():
    from rlvr_plugins.testing import adversarial_texts, time_each

    # one Python step per delimiter token: about 1 s for a megabyte of "$" on this machine
    out = time_each(lambda text: language_consistency(text, "en"), adversarial_texts(1_000_000), limit_s=3.0)
    assert out["chinese_in_text"][0] == 0.0
    assert out["letters"][0] == out["either_or"][0] == 1.0
    assert out["digits"][0] == out["spaces"][0] == 0.0


def test_an_unknown_target_is_refused_when_the_options_are_parsed():
    """Not when scoring: every completion would raise there and be masked instead of scored."""
    from rlvr_plugins.errors import PluginOptionError
    from rlvr_r1.plugins import LanguagePlugin

    with pytest.raises(PluginOptionError) as err:
        LanguagePlugin.parse_options({"target": "xx"})
    assert str(err.value).startswith(
        "plugin 'r1-language': target must be one of ar, el, en, he, hi, ja, ko, ru, th, zh, got 'xx'. Valid options:"
    )
    assert LanguagePlugin.parse_options({"target": "zh"}).target == "zh"


# --- words as a reader sees them: escapes decoded, invisible characters dropped (issue 21, item 12) ---

# 我们先计算 = 5 Han words (U+6211 U+4EEC U+5148 U+8BA1 U+7B97), then "ok": 1 Latin word.


@pytest.mark.parametrize(
    "thinking",
    [
        "&#25105;&#20204;&#20808;&#35745;&#31639; ok",  # HTML decimal entities
        "&#x6211;&#x4EEC;&#x5148;&#x8ba1;&#x7b97; ok",  # HTML hexadecimal entities
        '\\char"6211\\char"4EEC\\char"5148\\char"8BA1\\char"7B97 ok',  # TeX \char, hexadecimal
        "\\char25105 \\char20204 \\char20808 \\char35745 \\char31639 ok",  # TeX \char, decimal
        "\\char'61021\\char'47154\\char'50510\\char'105041\\char'75627 ok",  # TeX \char, octal
        '\\symbol{"6211}\\symbol{"4EEC}\\symbol{"5148}\\symbol{"8BA1}\\symbol{"7B97} ok',  # LaTeX \symbol
        "^^^^6211^^^^4eec^^^^5148^^^^8ba1^^^^7b97 ok",  # TeX ^^^^ notation
        "\\u6211\\u4eec\\u5148\\u8ba1\\u7b97 ok",  # \u escapes
        "$\\text{&#25105;&#20204;&#20808;&#35745;&#31639;}$ ok",  # entities inside \text{}
    ],
)
def test_a_chinese_chain_of_thought_written_as_escapes_is_not_english(thinking):
    assert count_words(thinking) == Counter({"Han": 5, "Latin": 1})
    assert language_consistency(thinking, "en") == pytest.approx(1 / 6)
    assert language_consistency(thinking, "zh") == pytest.approx(5 / 6)


@pytest.mark.parametrize(
    "thinking, latin",
    [
        ("Let me add 2 &amp; 3, then check &lt;5&gt;.", 5),  # let me add then check
        ("I&#39;m sure: &quot;five&quot;", 4),  # I, m, sure, five: "I'm" is two words, as "don't"
        ('Use \\char"41 as a letter', 5),  # \char"41 is "A"
        ("\\char1114112 is not a character", 4),  # past U+10FFFF: left as written ("is not a character")
    ],
)
def test_real_english_with_escapes_still_scores_one(thinking, latin):
    assert count_words(thinking) == Counter({"Latin": latin})
    assert language_consistency(thinking, "en") == 1.0


def test_invisible_characters_do_not_split_or_make_words():
    # a reader sees "abcd" (one word) and two Han characters: 1 Latin + 2 Han
    thinking = "我们 a\u200bb\u2060c\u00add"
    assert count_words(thinking) == Counter({"Han": 2, "Latin": 1})
    assert language_consistency(thinking, "en") == pytest.approx(1 / 3)
    # Hangul filler letters draw nothing: not Hangul words
    assert count_words("\u3164\u3164 real text") == Counter({"Latin": 2})
