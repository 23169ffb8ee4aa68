"""The byte strings that the tokenizer fixtures encode (test/data/tokenizers/cases.json).

Each entry is one document as raw bytes: scripts and marks that split the
pre-tokenizer's letter runs, emoji sequences, code and whitespace layouts,
digits, contractions, control and space characters, strings that look like
special tokens, near-empty documents and invalid UTF-8. The text is written
for these fixtures; the long mixed documents come from a fixed LCG, so the
list is the same on every run. Imported by tools/make_tokenizer_fixtures.py.
"""

ENGLISH = [
    "A tokenizer turns text into numbers. It doesn't care whether the text is pretty; it only has to "
    "be exact, because a model trained on one split can't read another. We'll test it on prose like "
    "this, on code, and on bytes that aren't text at all. THEY'RE ALL DOCUMENTS, and each one ends here.",
    "Numbers such as 2048, 65536 and 3.5e10 appear in training logs: step 1200/5000, loss 2.731, "
    "lr 3.0e-4, 812 ms/step, 1.2M tokens/s. Headers look like '## Results' and bullets like '- item'.",
]

LATIN = [
    "Le château près de la rivière était fermé ; nous avons dîné à côté. "
    "Où est l'hôtel ? Ça dépend ! Élève, naïve, Noël, cœur, æther.",
    "Grüße aus Köln: die Straße ist nass, aber der Bäcker öffnet um 7 Uhr. "
    "ÄÖÜ äöü ß ẞ GROSSE Größe.",
    "¿Dónde está la estación? ¡Qué día! Não sei, mas a ação começa às três.",
    "Zażółć gęślą jaźń. Příliš žluťoučký kůň. "
    "Tiếng Việt có dấu: người, được, những. Ísland, Þing, ð.",
    # NFD: base letters followed by combining marks.
    "Cafe\u0301 au lait, nai\u0308ve, pin\u0303ata, A\u030angstro\u0308m, Rene\u0301e, u\u0308ber, Z\u0306e\u0300t.",
    "Precomposed é Å ñ vs decomposed e\u0301 A\u030a n\u0303; a mark at the start: \u0301x and alone \u0300 \u0308.",
    "Z\u0351\u0346\u0310a\u0352\u0308\u0301l\u0300\u0301\u0302g\u0303\u0304o\u0305\u0306\u0307"
    " text with stacked marks.",
    "Thiſ iſ it'ſ long s; the Kelvin sign \u212a and Turkish İstanbul, ışık.",
]

SCRIPTS = [
    "Привет, мир! Съешь же ещё этих "
    "мягких булок, да выпей чаю. "
    "ЁЖИК в тумане.",
    "Ґанок, їжак, є. Љубав, Њива, Ђак.",
    "Καλημέρα κόσμε· ΑΒΓΔ αβγδ ς ἀἐ.",
    "我们今天在图书馆学习了三个小时，然后去吃饭。"
    "天气很好！分词器需要处理标点：「引号」、《书名》。",
    "東京へ行きます。ひらがなとカタカナ、そして漢字。"
    "ｶﾀｶﾅ半角も。ラーメンを食べたい！",
    "안녕하세요. 오늘 날씨가 정말 좋네요. "
    "한국어 토크나이저 시험입니다. \u1100\u1161\u11a8 (conjoining jamo)",
    "iPhone15を買った。价格是5999元。서울 2024년, 東京2020.",
    "مرحبا بالعالم. هذا نص عربي "
    "قصير مع أرقام ١٢٣٤٥، "
    "وحركات: كَتَبَ الْكِتَابُ؟",
    "שלום עולם! זהו משפט בעברית "
    "עם ניקוד: שָׁלוֹם. \u200fRTL mark\u200e and LTR mark.",
    "नमस्ते दुनिया। यह हिंदी "
    "का एक छोटा वाक्य है। संख्या १२३।",
    "สวัสดีครับ ภาษาไทยไม่มี"
    "การเว้นวรรคระหว่างคำ ๑๒๓",
    "Բարեւ գամարջոբա გამარჯობა "
    "ሰላም வணக்கம் নমস্কার ចុះ",
]

EMOJI = [
    "Hello 👋 world 🌍! I ❤\ufe0f pizza 🍕🍕🍕 and ☕.",
    "Family 👨\u200d👩\u200d👧\u200d👦, coder 👩\U0001f3fd\u200d💻, "
    "flag 🏳\ufe0f\u200d🌈, pair 🧑\u200d🤝\u200d🧑.",
    "👍\U0001f3fb👍\U0001f3fc👍\U0001f3fd👍\U0001f3fe👍\U0001f3ff 👍",
    "\U0001f1ef\U0001f1f5\U0001f1fa\U0001f1f8\U0001f1e7\U0001f1f7\U0001f1fa\U0001f1e6 \U0001f1e9 "
    "🏴\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f",
    "1\ufe0f\u20e3 2\ufe0f\u20e3 #\ufe0f\u20e3 *\ufe0f\u20e3 🔟 ☺\ufe0e ☺\ufe0f 9\u20e3",
    "a😀b😀😀c 😀😀😀😀😀 !😀?",
]

CODE = [
    "int main(void) {\n\tfor (int i = 0; i < 10; ++i) {\n\t\tprintf(\"%d\\n\", i);\n\t}\n\treturn 0;\n}\n",
    "def tokens(text):\n    out = []  \n    for piece in split(text):\t# tab before comment\n"
    "        out.extend(merge(piece))\n\n\n    return out    \n",
    "line one\r\nline two\r\n\r\n\tindented\r\n    spaced\r\n\r\n\r\nend\r\n",
    "a\r\n\r\nb\n \nc\r\rd\n\n\n e \t\n\t \n\u00a0\nf \r\n g",
    "all: train\n\ntrain: main.o util.o\n\t$(CXX) -o $@ $^ $(LDFLAGS)\n\n%.o: %.cpp\n\t$(CXX) -c $<\n",
    "{\"name\": \"tiny\", \"layers\": [1, 2, 3], \"ok\": true, \"nested\": {\"k\": null}}\n"
    "key: value\nlist:\n  - one\n  - two\n",
    "<div class=\"x\">&amp; &lt;tag&gt;</div>\n<!-- comment -->\n"
    "cat file.txt | grep -E '^[a-z]+$' >> out.log 2>&1 && echo \"done\"",
    "| col | value |\n|-----|------:|\n| a   |   1.5 |\n\n```cpp\nx += y << 2;\n```\n"
    "!!! ??? ... --- *** ### ===\n!?!? .,;: ()[]{} @#$%^&*",
    "if (a&&b||!c) { x->y = z::w<T>(); } // ok\n/* block */ i++; j--; k **= 2; s = \"\\t\\\"\";",
]

CONTRACTIONS = [
    "I'M here, they'Re there, DON'T stop, we'LL see, she'D go, it'S fine, you'VE won, I'm, i'm, WE'RE.",
    "'s is how this begins. 'S too. 'T 're 've 'm 'll 'd 'RE 'Ve 'lL 'X",
    "don’t it’s rock’n’roll ʻokina ′prime′ ＇full＇ `tick` \u00b4acute",
    "'sup 'twas 'ello rock'n'roll O'Neil's ''s ''' 's's it''s can't've y'all'd've",
    "The cat's toy; the cats' toys. He said 'hello' and 'goodbye'. '123 'été ' s",
]

DIGITS = [
    "abc123def4567ghi 89j v1.2.3 3.14159 1,000,000 -42 +1-800-555-0199 0x1F 2024-05-20T12:34:56Z",
    "100% $9.99 €12,50 1st 2nd 3rd 4th 10km 5x5 1e-9 007 0.000001 12:00 ½",
    "٠١٢٣٤٥٦٧٨٩ ۰۱۲۳۴ ०१२३ "
    "０１２３４５６７８９ ๐๑๒",
    "x² y³ 10¹⁰ H₂O ½ ¾ Ⅻ ①②③ "
    "𝟏𝟐𝟑 ²³¹ 12³4",
]

CONTROL = [
    "".join("a" + chr(c) for c in range(0x20)) + "a\x7fz",
    "line\u2028next\u2029para\u0085nel\u00a0nbsp\u3000ideo\ufeffbom\u200bzw\u200dj\u2060wj\u202fnn\u1680og",
    "\ufeffStarts with a byte order mark.",
    "a\x0bb\x0cc\x1cd\x1de\x1ff \x0b\x0c \x1c\n\x00\x00\x00",
    "\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a word \u205f\u3000 \u00a0\u00a0x",
]

SPECIAL_LOOKALIKES = [
    "<|begin_of_text|>Hello<|eot_id|>",
    "<s>Hi</s> <unk> <pad> [CLS] [SEP] <|endoftext|>",
    "<|start_header_id|>user<|end_header_id|>\n\nWhat time is it?<|eot_id|>",
    "<|reserved_special_token_7|> <|begin_of_tex <<|eot_id|>> <|eot_id|<|end_of_text|>",
]

EMPTYISH = ["", " ", "\n", "\t", "  \n", "\r\n", "\u00a0", "\u3000\n"]

OTHER_UNICODE = [
    "private \ue000\uf8ff plane16 \U0010fffd nonchar \ufdd0\ufffe\uffff max \U0010ffff",
    "literal replacement �� and math 𝐀𝐁 ∫∑ ≠ ≤",
    "supercalifragilisticexpialidocious " + "ab" * 120 + " " + "a" * 200,
]

INVALID = [
    b"\x80",
    b"abc\x80def \xbf\xbf \x80\x81\x82\x83 end",
    b"caf\xc3 ok \xe2\x82 euro \xe2\x82",
    b"overlong \xc0\xaf \xc1\xbf \xe0\x80\xaf \xf0\x80\x80\xaf slash",
    b"surrogates \xed\xa0\x80 \xed\xbf\xbf \xed\xa0\xbd\xed\xb8\x80",
    b"high \xf5\x80\x80\x80 \xf8\x88\x80\x80\x80 \xfe\xff \xff \xf4\x90\x80\x80",
    b"Latin-1 by mistake: h\xe9llo w\xf6rld \xe0 bient\xf4t",
    b"   \x80   \n12\x803 \xc3\xa9\x80\xc3",
    b"emoji at the end \xf0\x9f\x98",
]


def runs_of_spaces():
    """x<n spaces>y for n = 1..40, and a document of trailing whitespace."""
    lines = "\n".join("x" + " " * n + "y" for n in range(1, 41))
    trailing = "".join("end" + " " * n + "\n" for n in range(1, 41, 3)) + "tail" + " " * 17
    return [lines, trailing]


def digit_lengths():
    """Digit strings of every length 1..25, space- and line-separated, and glued to words."""
    numbers = "1234567890" * 3
    runs = [numbers[:n] for n in range(1, 26)]
    return [" ".join(runs), "\n".join(runs), "".join(f"n{r}x" for r in runs[:12])]


FRAGMENTS = [
    "the", " quick", " brown", " fox", " été", " мир", " 東京", " 안녕",
    " مرحبا", " नमस\u094dत\u0947", " 😀", " 👨\u200d💻",
    "123", "4567890", " 42", ".", ",", "!", "?", "'s", "'LL", " don't", "\n", "\r\n", "\t", "  ", "    ",
    "\n\n", " \n", "()", "{", "}", " ->", " ==", "\u00a0", "\u3000", "\u2028", "\x00", "\x1b[0m", " x\u0301",
    "\u0301", " <|eot_id|>", "___", "...", "--", " ١٢", " １２", "²",
]


def mixed_documents(count=6, pieces=380, seed=20240520):
    """Documents glued from FRAGMENTS by a 32-bit LCG: the same bytes on every run."""
    state = seed
    documents = []
    for _ in range(count):
        parts = []
        for _ in range(pieces):
            state = (state * 1103515245 + 12345) % 2**31
            parts.append(FRAGMENTS[(state >> 8) % len(FRAGMENTS)])
        documents.append("".join(parts))
    return documents


def documents():
    """Every case as raw bytes, in a fixed order."""
    texts = (ENGLISH + LATIN + SCRIPTS + EMOJI + CODE + runs_of_spaces() + digit_lengths() + DIGITS
             + CONTRACTIONS + CONTROL + SPECIAL_LOOKALIKES + EMPTYISH + OTHER_UNICODE + mixed_documents())
    return [t.encode("utf-8") for t in texts] + list(INVALID)
