"""Chinese numerals read by value, and the strict scorer on Chinese answers (hand-worked cases, our own sentences)."""

from __future__ import annotations

from fractions import Fraction

import pytest

from ragrade.robust.detect import build_detectors
from ragrade.robust.match import contains, match_parts, same_text
from ragrade.robust.metrics import label_response
from ragrade.robust.numerals import number_spans, parse_number
from ragrade.robust.rgb_scoring import rgb_label_response, rgb_part_labels


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("0", 0),
        ("70", 70),
        ("1,600", 1600),  # comma-grouped thousands
        ("16.4", Fraction(164, 10)),
        ("零", 0),
        ("〇", 0),
        ("五", 5),
        ("两", 2),
        ("十", 10),  # 1 x 10
        ("十五", 15),  # 10 + 5
        ("七十", 70),  # 7 x 10
        ("二十五", 25),  # 2 x 10 + 5
        ("一百零一", 101),  # 1 x 100, zero gap, 1
        ("一百一十五", 115),  # 100 + 1 x 10 + 5
        ("两千零五", 2005),  # 2 x 1000, zero gap, 5
        ("两千五", 2500),  # colloquial: the last digit counts in hundreds
        ("三百五", 350),
        ("九千九百九十九", 9999),
        ("壹佰贰拾叁", 123),  # formal characters
        ("3万", 30_000),
        ("1.5亿", 150_000_000),
        ("三点五亿", 350_000_000),  # 3.5 x 10^8
        ("十万", 100_000),
        ("一万五", 15_000),  # colloquial: 1 x 10^4 + 5 x 10^3
        ("一万零五", 10_005),
        ("12万3千", 123_000),  # 12 x 10^4 + 3 x 10^3
        ("3万5千", 35_000),
        ("三千万", 30_000_000),  # 3000 x 10^4
        ("三亿五千万", 350_000_000),  # 3 x 10^8 + 5000 x 10^4
        ("一亿零五百万", 105_000_000),
        ("一万亿", 10**12),  # 10^4 x 10^8
        ("1,600万", 16_000_000),
        ("二〇二三", 2023),  # digit by digit
        ("一九九八", 1998),
        ("三点六", Fraction(36, 10)),
        ("十五点五", Fraction(155, 10)),
    ],
)
def test_parse_number_reads_the_value(text: str, value: int | Fraction) -> None:
    assert parse_number(text) == value


@pytest.mark.parametrize(
    "text",
    [
        "",
        "万",
        "百",
        "千万",
        "万一",
        "十十",
        "十百",
        "二二十",
        "一百零",
        "二25",
        "8,9",
        "3.6.1",
        "三点",
        "点五",
        "一百十五",
    ],
)
def test_parse_number_refuses_what_is_not_one_number(text: str) -> None:
    assert parse_number(text) is None


def test_number_spans_are_maximal_and_skip_numerals_inside_words() -> None:
    def spans(text: str) -> list[tuple[str, Fraction | int]]:
        return [(text[s:e], v) for s, e, v in number_spans(text)]

    assert spans("三十六人") == [("三十六", 36)]  # never 16 or 6 inside 36
    assert spans("约2万人") == [("2万", 20_000)]
    assert spans("山田太一3日抵达") == [("3", 3)]  # the run 一3 is not one number; 一 belongs to the name
    assert spans("第一名，答案：五。") == [("一", 1), ("五", 5)]
    assert spans("8、9号") == [("8", 8), ("9", 9)]
    assert spans("统一了四川的标准") == []  # numerals inside words are characters
    assert spans("五次") == [("五", 5)]  # a numeral before a measure word is a number
    assert spans("agent 007") == []  # leading zero: a code, not an amount
    assert spans("版本3.6.1") == [("3", 3), ("6", 6), ("1", 1)]


@pytest.mark.parametrize(
    ("text", "alias", "expected"),
    [
        # full-width and ideographic punctuation separate the parts of a list
        ("两轮比赛的得分分别是8，9分。", "8", True),
        ("两轮比赛的得分分别是8，9分。", "9", True),
        ("两轮比赛的得分分别是8、9分。", "9", True),
        ("两轮比赛的得分分别是8；9分。", "8", True),
        # Chinese numerals compared by value, in both directions and mixed forms
        ("本届会议共有七十名代表出席。", "70", True),
        ("本届会议共有70名代表出席。", "七十", True),
        ("新馆藏书约3万册。", "30000", True),
        ("新馆藏书约30,000册。", "3万", True),
        ("新馆藏书约三万册。", "3万", True),
        ("项目总投资1.5亿元。", "150000000", True),
        ("项目总投资一亿五千万元。", "1.5亿", True),
        ("大桥于两千零五年通车。", "2005年", True),
        ("大桥于二〇〇五年通车。", "2005年", True),
        ("会议定于二十五日召开。", "25日", True),
        ("队伍一共获得十二枚奖牌。", "12", True),
        # the number boundary is for digits: numerals inside names are part of the name
        ("山田太一3日抵达北湾市。", "山田太一", True),
        ("王万2019年当选为会长。", "王万", True),
        ("林二25岁时开始写作。", "林二", True),
        # what must still not match: a different number, or part of a longer one
        ("本届会议共有七十五名代表出席。", "70", False),
        ("本届会议共有170名代表出席。", "七十", False),
        ("他今年三十六岁。", "十六", False),
        ("他参加了十四次比赛。", "四次", False),
        ("新馆藏书约2万册。", "2", False),
        ("增长率为三点六个百分点。", "六", False),
        ("两省实现了统一。", "1", False),
        ("会议在四川省举行。", "4", False),
        ("会议在11月3日举行。", "1月3日", False),
        ("大桥于2015年通车。", "2005年", False),
    ],
)
def test_strict_matching_reads_chinese_like_a_careful_grader(text: str, alias: str, expected: bool) -> None:
    assert contains(text, alias) is expected


@pytest.mark.parametrize(
    ("response", "answer", "parts"),
    [
        # issue 38 item 6b: wrong before, right now
        ("答案是十。", [["10"]], [True]),  # a lone numeral after 是, before punctuation
        ("答案是八和9。", [["8"], ["9"]], [True, True]),  # 八 between 是 and 和
        ("八强", [["8强"]], [True]),  # 强 (rank) is a measure word
        ("十一月九", [["11月9"]], [True]),  # 九 after a date character, at the end
        ("木村隆二十五日被捕", [["木村隆二"]], [True]),  # 二十五 reads as 25, but the name is literally there
        # right before, and still right
        ("答案：十。", [["10"]], [True]),
        ("三%", [["3%"]], [True]),
        # must stay wrong: numerals inside words are not numbers
        ("我们一起去北湾市。", [["1"]], [False]),
        ("两省实现了统一。", [["1"]], [False]),
        ("两种方法的效果一样。", [["1"]], [False]),
        ("这件事十分重要。", [["10"]], [False]),  # 十分: "very"
        ("答案是一样的。", [["1"]], [False]),  # after 是, but glued to 样
        # must stay wrong: a number of the answer is never part of a longer number
        ("他今年三十六岁。", [["十六"]], [False]),
        ("答案是十五。", [["10"]], [False]),
        # a two-part answer needs both parts
        ("答案是八。", [["8"], ["9"]], [True, False]),
    ],
)
def test_strict_scoring_reads_lone_numerals_in_context(
    response: str, answer: list[list[str]], parts: list[bool]
) -> None:
    assert match_parts(response, answer) == parts
    labels = label_response(response, answer, build_detectors())
    assert labels["matched_parts"] == parts and labels["correct"] is all(parts)


def test_lone_numerals_are_numbers_only_where_they_read_as_one() -> None:
    def spans(text: str) -> list[tuple[str, Fraction | int]]:
        return [(text[s:e], v) for s, e, v in number_spans(text)]

    assert spans("答案是十。") == [("十", 10)]  # after a copula, before punctuation
    assert spans("答案为三") == [("三", 3)]  # after a copula, at the end
    assert spans("是八和九") == [("八", 8), ("九", 9)]  # around a conjunction
    assert spans("十一月九") == [("十一", 11), ("九", 9)]  # after a date character
    assert spans("进入八强") == [("八", 8)]  # before a rank
    assert spans("是一样的") == [] and spans("一起") == [] and spans("统一。") == []
    assert spans("木村隆二十五日") == [("二十五", 25)]  # a run of numerals is one number


def test_a_name_is_found_literally_even_where_its_numeral_starts_a_number() -> None:
    assert contains("木村隆二十五日被捕", "木村隆二")
    assert contains("山田太一十五日抵达。", "山田太一")
    assert not contains("木村隆三十五日被捕", "木村隆二")  # a different character is a different name
    assert not contains("他今年三十六岁。", "十六")  # a number of the alias is not literal: never inside a number


def test_multi_part_answers_joined_by_a_full_width_comma_are_correct() -> None:
    detectors = build_detectors()
    answer = [["8"], ["9"]]
    labels = label_response("两轮比赛的得分分别是8，9分。", answer, detectors)
    assert labels["matched_parts"] == [True, True] and labels["correct"] is True
    assert match_parts("冠军和亚军分别获得七十、六十五分", [["70"], ["65"]]) == [True, True]


def test_rgb_scoring_keeps_the_original_blind_spot() -> None:
    # the original scorer compares characters: "70" is not found in "七十" (kept, to reproduce published numbers)
    assert rgb_part_labels("本届会议共有七十名代表出席。", [["70"]]) == [0]
    assert rgb_label_response("本届会议共有七十名代表出席。", [["70"]], "zh")["correct"] is False
    assert label_response("本届会议共有七十名代表出席。", [["70"]], build_detectors())["correct"] is True


def test_same_text_compares_numbers_by_value() -> None:
    assert same_text("七十", "70") and same_text("3万人", "30000人") and same_text("Port  Alder", "port alder")
    assert not same_text("七十", "71") and not same_text("北湾市", "东港")


_CN = "零一二三四五六七八九"


def _write_cn(n: int) -> str:
    """Chinese numerals for ``n`` by the textbook rules (an independent writer, for a round trip)."""
    if n < 10_000:
        out, zero = "", False
        for unit, value in (("千", 1000), ("百", 100), ("十", 10), ("", 1)):
            d = n // value % 10
            if d:
                out += ("零" if zero and out else "") + _CN[d] + unit
                zero = False
            else:
                zero = True
        return out or "零"
    for unit, value in (("亿", 10**8), ("万", 10**4)):
        if n >= value:
            high, low = divmod(n, value)
            rest = "" if low == 0 else ("零" if low < value // 10 else "") + _write_cn(low)
            return _write_cn(high) + unit + rest
    raise AssertionError(n)


def test_parse_number_round_trips_textbook_numerals() -> None:
    import random

    rng = random.Random(7)
    numbers = [0, 10, 15, 101, 1010, 10_001, 100_000, 10**8, 10**8 + 1, 10**12, 2_005, 150_000_000]
    numbers += [rng.randrange(10 ** rng.randint(1, 13)) for _ in range(3000)]
    assert (
        _write_cn(2005) == "二千零五" and _write_cn(150_000_000) == "一亿五千万" and _write_cn(10_010) == "一万零一十"
    )
    for n in numbers:
        assert parse_number(_write_cn(n)) == n, (n, _write_cn(n))
        assert parse_number(f"{n:,}") == n
