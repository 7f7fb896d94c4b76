"""Write tracker/corpus/corpus.json: the tokenizer behaviour corpus, generated deterministically.

Every sample is composed here from word lists and snippets written for hubwatch (see README.md beside
this file); a fixed seed makes the output the same on every run, so the committed corpus.json is exactly
what this script prints. Run: python tracker/corpus/make_corpus.py (it rewrites corpus.json beside it).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

SEED = 20260523
OUT = Path(__file__).with_name("corpus.json")

SUBJECTS = ["The model", "Our team", "A small robot", "The weather station", "Every tokenizer", "My neighbour",
            "The old library", "This compiler", "A curious cat", "The night shift", "Grandma's recipe", "The river",
            "Their startup", "The committee", "An engineer in Lisbon", "The museum's new wing"]
VERBS = ["reads", "rewrote", "will review", "has measured", "quietly ignored", "can't explain", "didn't expect",
         "is translating", "summarised", "keeps forgetting", "won't accept", "carefully tested", "painted",
         "downloaded", "re-labelled", "was counting"]
OBJECTS = ["the quarterly report", "three hundred and twelve pages", "a 4.7 GB checkpoint", "the user's question",
           "every comma in the contract", "the bug from last Tuesday", "a well-known proverb", "the café's menu",
           "tokens per second", "the naïve approach", "an e-mail from Dr. O'Neill", "the U.S.-based supplier",
           "fifty-five lines of YAML", "the 1990s archive", "a résumé", "the so-called \"fast path\""]
ENDINGS = [".", "!", "?", "...", " (again).", "; nobody noticed.", ", as usual.", " — or so they say.", ": twice.",
           " before 9 a.m.", " in 2025.", ", didn't they?"]

SCRIPTS = {
    "zh": ["今天天气很好。", "我们明天去北京。", "这个模型的分词器改变了。", "请把文件发给我。", "机器学习很有意思。",
           "他在图书馆看书。", "谢谢你的帮助！", "数据集有一千个样本。"],
    "ja": ["今日はいい天気ですね。", "東京駅で会いましょう。", "このトークナイザーは新しいです。", "ありがとうございます。",
           "カタカナとひらがなと漢字。", "明日の会議は十時からです。", "猫が窓の外を見ている。"],
    "ko": ["안녕하세요, 만나서 반갑습니다.", "오늘은 비가 옵니다.", "모델이 업데이트되었습니다.", "한국어 문장을 토큰화합니다.",
           "감사합니다!", "서울에서 부산까지 기차로 갔어요."],
    "ar": ["مرحبا بكم في المكتبة.", "الطقس جميل اليوم.", "هذا النموذج يتعلم بسرعة.", "شكرا جزيلا لك.",
           "أين محطة القطار؟"],
    "he": ["שלום, מה שלומך?", "הספר נמצא על השולחן.", "תודה רבה על העזרה.", "המודל החדש מהיר יותר."],
    "ru": ["Привет, как дела?", "Сегодня хорошая погода.", "Модель обучалась три недели.", "Спасибо за помощь!",
           "Где находится ближайшая станция метро?", "Токенизатор изменился без предупреждения."],
    "el": ["Καλημέρα σε όλους.", "Το μοντέλο είναι έτοιμο.", "Ευχαριστώ πολύ!", "Πού είναι η θάλασσα;"],
    "hi": ["नमस्ते, आप कैसे हैं?", "आज मौसम अच्छा है।", "यह मॉडल हिंदी समझता है।", "धन्यवाद!"],
    "th": ["สวัสดีครับ", "วันนี้อากาศดีมาก", "ขอบคุณมากค่ะ", "โมเดลนี้เร็วมาก"],
    "tr": ["Günaydın, nasılsınız?", "İstanbul'da yağmur yağıyor.", "Çok teşekkür ederim.", "Şu ağacın gölgesi güzel."],
    "vi": ["Xin chào, bạn khỏe không?", "Hôm nay trời đẹp quá.", "Cảm ơn bạn rất nhiều.", "Mô hình này học rất nhanh."],
    "de": ["Größenänderung der Straße über Nacht.", "Die Übersetzung ist fast fertig.", "Schöne Grüße aus München!",
           "Das Fußballspiel wurde verschoben."],
    "pl": ["Zażółć gęślą jaźń.", "Dziękuję bardzo za pomoc.", "Pociąg do Krakowa się spóźnia."],
    "am": ["ሰላም ነው?", "አመሰግናለሁ።"],
    "ta": ["வணக்கம், எப்படி இருக்கிறீர்கள்?", "நன்றி!"],
    "ka": ["გამარჯობა, როგორ ხარ?", "მადლობა!"],
    "hy": ["Բարև, ինչպես ես:", "Շնորհակալություն:"],
    "bn": ["আপনি কেমন আছেন?", "ধন্যবাদ!"],
    "fa": ["سلام، حال شما چطور است؟", "متشکرم!"],
    "uk": ["Добрий день! Як справи?", "Дякую за допомогу."],
}

NAMES = ["total", "count", "user_id", "tokens", "buf", "result", "cache_key", "idx", "payload", "sha", "items", "path"]
CODE = [
    "def {a}({b}):\n    return {b} * 2\n",
    "for {a} in range(len({b})):\n\tprint({b}[{a}])\n",
    "class {A}:\n    def __init__(self, {a}: int) -> None:\n        self.{a} = {a}\n",
    "if {a} is None:\n    raise ValueError(f\"missing {{{a}!r}}\")\n",
    "const {a} = {b}.map((x) => x + 1).filter(Boolean);\n",
    "function {a}({b}) {{\n  return {b}?.length ?? 0;\n}}\n",
    "let mut {a}: Vec<u32> = Vec::with_capacity(16);\n{a}.push(42);\n",
    "fn {a}(x: &str) -> Option<usize> {{ x.find(\"::\") }}\n",
    "#include <stdio.h>\nint main(void) {{ int {a} = 0; printf(\"%d\\n\", {a}); return 0; }}\n",
    "SELECT {a}, COUNT(*) FROM {b} WHERE {a} <> '' GROUP BY {a} ORDER BY 2 DESC;\n",
    "for f in *.json; do jq '.{a}' \"$f\" >> {b}.txt; done\n",
    "<div class=\"{a}\"><span id='{b}'>&lt;b&gt;</span></div>\n",
    "{{\"{a}\": [1, 2.5, null, true], \"{b}\": {{\"nested\": \"\\u00e9\"}}}}\n",
    "    {a} = [x**2 for x in {b} if x % 3 == 0]\n",
    "{a}:\n  - name: {b}\n    enabled: true\n",
    "git commit -m \"fix({a}): handle empty {b}\" && git push origin HEAD\n",
    "import numpy as np\n{a} = np.zeros((3, 4), dtype=np.float32)\n",
    "/* {A} */ #define MAX_{A} 0xFF\n",
    "    # TODO({a}): remove once {b} >= 2.0\n",
    "lambda {a}, {b}: {{**{a}, **{b}}}\n",
]

MATH = [
    "{x} + {y} = {s}", "{x} × {y} = {p}", "{x} / {y} ≈ {q}", "√{sq} = {r}", "{x}² − {y}² = ({x}−{y})({x}+{y})",
    "$\\frac{{{x}}}{{{y}}} + \\alpha_{{{r}}}$", "$$\\int_0^{{{r}}} x^2\\,dx = \\frac{{{r}^3}}{{3}}$$",
    "∑_{{i=1}}^{{{x}}} i = {t}", "P(A ∩ B) ≤ min(P(A), P(B))", "{x}.{y}e-{r}", "{x},{y}% of {s}",
    "f(x) = {x}x³ − {y}x + {r}", "∀ε > 0 ∃δ > 0: |x − {r}| < δ ⇒ |f(x) − L| < ε", "{big}", "-{x}.{y}",
    "0x{hexv}", "{x}:{y}:{r}", "1/{y} ≠ 1/{x}",
]

EDGE = [
    " ", "  ", "\t", "\n", "\r\n", "\n\n\n", "   leading", "trailing   ", "a\u00a0b", "tab\there", "line1\r\nline2",
    "mixed \t \n whitespace", "    four spaces", "\u200b", "zero\u200bwidth", "e\u0301", "\u00e9", "ﬁ ligature",
    "ＦＵＬＬＷＩＤＴＨ", "\u202eRTL override", "\u200fRLM mark", "a\u0000b", "bell\u0007", "🙂", "👍🏽", "👨‍👩‍👧‍👦",
    "🏳️‍🌈", "🇺🇳🇯🇵", "❤️", "🤖🤖🤖", "emoji in text 🎉 done", "😀😃😄😁😆", "ok👌", "#️⃣", "🧑🏿‍💻", "🫠",
    "!!!!!!!!", "????", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "----------", "__init__", "...", "…", "“quotes”",
    "‘single’", "«guillemets»", "—", "–", "•", "→ ← ↑ ↓", "™ © ®", "°C", "½ ¼ ¾", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "𝐛𝐨𝐥𝐝",
    "\ufeffBOM", "soft\u00adhyphen", "Ωmega", "ǅ", "İstanbul", "ß", "ﬀ", "\U0001f600\U0001f600", "  \n  ",
]

JOINERS = ("", " ", "\n", "  ")

CHAT = [
    [("user", "Hi! Can you help me?"), ("assistant", "Of course. What do you need?")],
    [("system", "You are a concise assistant."), ("user", "What is 2 + 2?"), ("assistant", "4")],
    [("user", "Translate 'good morning' to French."), ("assistant", "Bonjour.")],
    [("user", "Write a haiku about rain."), ("assistant", "Soft rain on the roof\nthe kettle begins to sing\nslow grey afternoon")],
    [("system", "Answer in JSON."), ("user", "List two colours."), ("assistant", "{\"colours\": [\"red\", \"blue\"]}")],
    [("user", "¿Dónde está la estación?"), ("assistant", "Está a dos calles de aquí.")],
    [("user", "Explain recursion briefly."), ("assistant", "A function that calls itself on a smaller input."),
     ("user", "Example?"), ("assistant", "def f(n): return 1 if n == 0 else n * f(n - 1)")],
    [("user", "你好"), ("assistant", "你好！有什么可以帮你的吗？")],
    [("user", "Summarise: the meeting moved to Friday."), ("assistant", "Meeting: now Friday.")],
    [("user", "Say only 🙂"), ("assistant", "🙂")],
]


def _prose(rng: random.Random, n: int) -> list[str]:
    out: set[str] = set()
    while len(out) < n:
        parts = [f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)}{rng.choice(ENDINGS)}"
                 for _ in range(rng.choice((1, 1, 2, 3)))]
        out.add(" ".join(parts))
    return sorted(out)


def _scripts(rng: random.Random, n: int) -> list[str]:
    out: set[str] = set()
    langs = sorted(SCRIPTS)
    for lang in langs:  # every phrase once, then mixtures
        out.update(SCRIPTS[lang])
    while len(out) < n:
        a, b = rng.choice(langs), rng.choice(langs)
        out.add(f"{rng.choice(SCRIPTS[a])} {rng.choice(SCRIPTS[b])}")
    return sorted(out)[:n]


def _code(rng: random.Random, n: int) -> list[str]:
    out: set[str] = set()
    while len(out) < n:
        a, b = rng.sample(NAMES, 2)
        out.add(rng.choice(CODE).format(a=a, b=b, A=a.title().replace("_", "")))
    return sorted(out)


def _math(rng: random.Random, n: int) -> list[str]:
    out: set[str] = set()
    while len(out) < n:
        x, y, r = rng.randint(2, 9999), rng.randint(2, 999), rng.randint(1, 12)
        out.add(rng.choice(MATH).format(x=x, y=y, r=r, s=x + y, p=x * y, q=round(x / y, 4), sq=r * r, t=x * (x + 1) // 2,
                                        big=f"{rng.randint(10**9, 10**15):,}", hexv=f"{rng.getrandbits(32):08X}"))
    return sorted(out)


def _edge(rng: random.Random, n: int) -> list[str]:
    out = list(dict.fromkeys(EDGE))
    seen = set(out)
    while len(out) < n:
        a, b = rng.choice(EDGE), rng.choice(EDGE)
        text = a + rng.choice(JOINERS) + b
        if text not in seen:
            seen.add(text)
            out.append(text)
    return out


def _chat(rng: random.Random, n: int) -> list[list[list[str]]]:
    out = [[list(turn) for turn in conv] for conv in CHAT]
    prose = _prose(rng, n * 2)
    while len(out) < n:
        conv = [["user", rng.choice(prose)], ["assistant", rng.choice(prose)]]
        if rng.random() < 0.4:
            conv.insert(0, ["system", "You are a helpful assistant."])
        if rng.random() < 0.3:
            conv += [["user", "Thanks!"], ["assistant", "You're welcome."]]
        if conv not in out:
            out.append(conv)
    return out


def build() -> dict:
    """The corpus: a version, and samples {id, category, text} (chat samples carry `turns` instead)."""
    rng = random.Random(SEED)
    plan = (("prose", _prose, 260), ("scripts", _scripts, 200), ("code", _code, 180), ("math", _math, 130),
            ("whitespace_emoji", _edge, 130))
    samples = []
    for category, make, count in plan:
        samples += [{"id": f"{category}-{i:04d}", "category": category, "text": text}
                    for i, text in enumerate(make(rng, count))]
    samples += [{"id": f"chat-{i:04d}", "category": "chat", "turns": turns} for i, turns in enumerate(_chat(rng, 100))]
    return {"version": 1, "seed": SEED, "samples": samples}


def main() -> None:
    OUT.write_text(json.dumps(build(), ensure_ascii=False, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
