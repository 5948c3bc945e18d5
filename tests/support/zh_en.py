"""A small English-Chinese parallel corpus, made from templates: tests/data/zh-en holds its output.

Chinese is written without spaces between words: the corpus is there so that every step of mtkit (prepare,
bpe, train, translate, score) is run on such a language. Each sentence is a subject, an action and a time
or a manner, translated phrase by phrase (Chinese puts the time first and the place before the verb).
`python -m tests.support.zh_en` rewrites the files; tests/data/test_zh_en_pipeline.py checks they match.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parents[1] / "data" / "zh-en"
SUBJECTS = [  # (English, plural?, Chinese)
    ("A dog", False, "一只狗"),
    ("A cat", False, "一只猫"),
    ("A man", False, "一个男人"),
    ("A woman", False, "一个女人"),
    ("A little girl", False, "一个小女孩"),
    ("An old man", False, "一位老人"),
    ("Two children", True, "两个孩子"),
    ("Three friends", True, "三个朋友"),
    ("A group of people", True, "一群人"),
    ("Two dogs", True, "两只狗"),
]
ACTIONS = [  # (English after is/are, Chinese)
    ("running on the grass", "在草地上奔跑"),
    ("playing on the beach", "在海滩上玩耍"),
    ("cooking in the kitchen", "在厨房里做饭"),
    ("riding a bike on the street", "在街上骑自行车"),
    ("reading a book in the park", "在公园里看书"),
    ("sleeping by the river", "在河边睡觉"),
    ("sitting on a red bench", "坐在一张红色的长椅上"),
    ("walking in the snow", "在雪地里散步"),
    ("swimming in the lake", "在湖里游泳"),
    ("waiting at the station", "在车站等候"),
]
TIMES = [  # (English at the end, Chinese at the start)
    ("", ""),
    (" today", "今天"),
    (" in the morning", "早上"),
    (" at night", "晚上"),
    (" after school", "放学后"),
]
SPLITS = {"train": 360, "valid": 40, "test": 40}


def pairs(seed: int = 1) -> dict[str, list[tuple[str, str]]]:
    """Every subject, action and time combination (500), shuffled with `seed` and cut into the splits."""
    every = []
    for (en_s, plural, zh_s), (en_a, zh_a), (en_t, zh_t) in (
        (s, a, t) for s in SUBJECTS for a in ACTIONS for t in TIMES
    ):
        en = f"{en_s} {'are' if plural else 'is'} {en_a}{en_t}."
        zh = f"{zh_t}{zh_s}{zh_a}。" if zh_a.startswith("坐") else f"{zh_t}{zh_s}正{zh_a}。"
        every.append((en, zh))
    random.Random(seed).shuffle(every)
    out, start = {}, 0
    for split, n in SPLITS.items():
        out[split] = every[start : start + n]
        start += n
    return out


def write(directory: Path = HERE) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for split, lines in pairs().items():
        for i, lang in enumerate(("en", "zh")):
            (directory / f"{split}.{lang}").write_text("".join(p[i] + "\n" for p in lines), encoding="utf-8")


if __name__ == "__main__":
    write(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE)
