#!/usr/bin/env python3
"""Records expected tokenizer outputs for tests/model/tokenizer_test.cc and chat_format_test.cc,
computed with independent implementations: the PyPI `tokenizers` library (HF's Rust tokenizer,
regex-based pre-tokenizers) and `jinja2` (the model's own chat template).

The BPE is built from SmolLM2's GGUF vocabulary and merges (read with the `gguf` package) with the
pre-tokenizer of SmolLM2's tokenizer.json: Sequence[Digits(individual_digits), ByteLevel(GPT-2
regex)]. The same vocabulary is also run with the plain GPT-2 and the Llama 3 pre-tokenizers, to
check those scanners. A tiny BPE trained here with the Llama 3 split is saved as a Hugging Face
directory (tests/data/tokenizer_golden_hf_tiny/) to check Tokenizer::FromHfDir. Two SentencePiece-style
BPE tokenizers with byte fallback are saved the same way: Llama 2's layout (a "▁" prepended,
tokenizer_golden_hf_spm_tiny/) and Gemma's (no prefix space, <start_of_turn>/<end_of_turn> special tokens,
tokenizer_golden_hf_gemma_tiny/). The chat goldens render SmolLM2's own template and the published
templates of Llama 2, Llama 3, Qwen 2.5 (its tool-call branches left out), Phi-3-mini and Gemma 3.

Output (tests/data/tokenizer_golden.txt), one case a line:  VARIANT <TAB> HEX(UTF-8 text) <TAB> ids
and tests/data/tokenizer_golden_chat.txt:  NAME <TAB> HEX(rendered text)

Gemma 3's own 262k-piece SentencePiece vocabulary (read from the Gemma 3 270M GGUF) is run as HF's
converter runs a SentencePiece BPE model: merges of every split of a piece into two pieces, ordered by
the merged piece's score, byte fallback, "▁" for spaces with none prepended, control tokens special and
user-defined ones (newline runs, HTML tags) added as non-special tokens: variant "gemma3".

Usage: scripts/gen_tokenizer_golden.py [models/SmolLM2-135M-Instruct.Q4_1.gguf [models/gemma-3-270m-q4_k_m.gguf]]
"""
import os
import sys

import gguf
import jinja2
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GGUF_PATH = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
GEMMA_PATH = sys.argv[2] if len(sys.argv) > 2 else os.path.join(ROOT, "models", "gemma-3-270m-q4_k_m.gguf")
DATA = os.path.join(ROOT, "tests", "data")

LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
                  r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

CORPUS = [
    "Hello, world!",
    "The quick brown fox jumps over the lazy dog.",
    "I'm sure they'll say it's fine, but we've DON'T and I'D'VE",
    "'sup 'Tis 'RE 'll",
    "café résumé naïve façade Ünïcödé São Paulo Kraków",
    "e\u0301 vs \u00e9, a\u0308",
    "Ελληνικά κείμενο και Русский текст",
    "你好，世界！这是一个测试。",
    "日本語のテキストとカタカナ、ひらがな",
    "한국어 문장입니다",
    "emoji 👍🏽 🎉🎉 👨\u200d👩\u200d👧 ❤️",
    "a   b    c",
    "   leading spaces",
    "trailing spaces   ",
    "\t\ttabs\tand\ttabs",
    "line1\nline2\n\n\nline3\r\nline4",
    " \n \n  \t x",
    "def square(x):\n    return x ** 2 + 1\n",
    "for (int i = 0; i < n; ++i) { sum += a[i]; }",
    "<div class=\"main\">&nbsp;</div>",
    "1234567890",
    "pi is 3.14159 and e is 2.71828",
    "year 2024, 12,345.67 dollars, 1e-9",
    "Ⅻ ½ ² ³ ١٢٣ ۴۵۶",
    "!!! ??? ... --- ***",
    "https://example.com/path?q=1&r=two#frag",
    "user@example.org said: \"quote\" (paren) [bracket]",
    "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
    "text<|im_end|>more<|endoftext|>",
    "<|im_start|><|im_start|>",
    "supercalifragilisticexpialidocious antidisestablishmentarianism",
    "עברית ועربية",
    "MiXeD CaSe WoRdS",
    "x",
    " ",
    "",
    "\u00a0non-breaking\u2003em space\u3000ideographic",
    "snake_case_name camelCaseName kebab-case-name",
]

QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
                 r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

# The chat templates published with meta-llama/Llama-2-7b-chat-hf and Meta-Llama-3-8B-Instruct.
LLAMA2_TEMPLATE = (
    "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}"
    "{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}"
    "{% set system_message = false %}{% endif %}{% for message in loop_messages %}"
    "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "{% if loop.index0 == 0 and system_message != false %}"
    "{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}"
    "{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}"
    "{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}"
    "{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}")
LLAMA3_TEMPLATE = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}"
    "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'"
    "+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}"
    "{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}")


# Qwen2.5-Instruct's template without its tool-call branches (the conversations here have no tools).
QWEN25_TEMPLATE = (
    "{%- if messages[0]['role'] == 'system' %}{{- '<|im_start|>system\\n' + messages[0]['content'] + "
    "'<|im_end|>\\n' }}{%- else %}{{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a "
    "helpful assistant.<|im_end|>\\n' }}{%- endif %}{%- for message in messages %}{%- if (message.role == \"user\") "
    "or (message.role == \"system\" and not loop.first) or (message.role == \"assistant\" and not "
    "message.tool_calls) %}{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}"
    "{%- endif %}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}")
# microsoft/Phi-3-mini-4k-instruct's template.
PHI3_TEMPLATE = (
    "{% for message in messages %}{% if message['role'] == 'system' %}{{'<|system|>\\n' + message['content'] + "
    "'<|end|>\\n'}}{% elif message['role'] == 'user' %}{{'<|user|>\\n' + message['content'] + '<|end|>\\n'}}"
    "{% elif message['role'] == 'assistant' %}{{'<|assistant|>\\n' + message['content'] + '<|end|>\\n'}}{% endif %}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% else %}{{ eos_token }}{% endif %}")
# google/gemma-3's template (text parts).
GEMMA3_TEMPLATE = """{{ bos_token }}
{%- if messages[0]['role'] == 'system' -%}
    {%- if messages[0]['content'] is string -%}
        {%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}
    {%- else -%}
        {%- set first_user_prefix = messages[0]['content'][0]['text'] + '\n\n' -%}
    {%- endif -%}
    {%- set loop_messages = messages[1:] -%}
{%- else -%}
    {%- set first_user_prefix = "" -%}
    {%- set loop_messages = messages -%}
{%- endif -%}
{%- for message in loop_messages -%}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}
        {{ raise_exception("Conversation roles must alternate user/assistant/user/assistant/...") }}
    {%- endif -%}
    {%- if (message['role'] == 'assistant') -%}
        {%- set role = "model" -%}
    {%- else -%}
        {%- set role = message['role'] -%}
    {%- endif -%}
    {{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else "") }}
    {%- if message['content'] is string -%}
        {{ message['content'] | trim }}
    {%- elif message['content'] is iterable -%}
        {%- for item in message['content'] -%}
            {%- if item['type'] == 'text' -%}
                {{ item['text'] | trim }}
            {%- endif -%}
        {%- endfor -%}
    {%- else -%}
        {{ raise_exception("Invalid content type") }}
    {%- endif -%}
    {{ '<end_of_turn>\n' }}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{'<start_of_turn>model\n'}}
{%- endif -%}
"""


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


# Seeded random strings over pieces that stress the pre-tokenizers' boundaries (contractions, digit
# runs, whitespace runs before words and newlines, mixed scripts, special tokens).
RANDOM_PIECES = ["a", "b", "Z", "the", " ", "  ", "\n", "\r\n", "\t", "0", "7", "42", "'", "'s", "'LL", "\u00e9",
                 "\u00df", "\u03a9", "\u044f", "\u4e2d", "\u6587", "\u306e", "\U0001F600", "\U0001F3FD", "\u200d",
                 "!", "?", ".", ",", "(", ")", "_", "-", "\u2135", "\u0661", "\u00bd", "\u216b", "\u00a0", "\u3000",
                 "<|im_start|>", "<|im_end|>", "<", "|", ">", " x", " 1"]


def random_corpus(count, seed=7):
    import random
    rng = random.Random(seed)
    return ["".join(rng.choice(RANDOM_PIECES) for _ in range(rng.randrange(1, 30))) for _ in range(count)]


def read_gguf(path):
    r = gguf.GGUFReader(path)
    f = r.fields
    tokens = f["tokenizer.ggml.tokens"].contents()
    types = f["tokenizer.ggml.token_type"].contents()
    merges = f["tokenizer.ggml.merges"].contents()
    template = f["tokenizer.chat_template"].contents()
    return tokens, types, merges, template


def build_bpe(tokens, types, merges, pre, ignore_merges=False):
    vocab = {t: i for i, t in enumerate(tokens)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[tuple(m.split(" ", 1)) for m in merges],
                               ignore_merges=ignore_merges))
    tok.pre_tokenizer = pre
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False)
                            for t, ty in zip(tokens, types) if ty == 3])
    return tok


def byte_level(use_regex):
    return pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=use_regex)


def split_pre(pattern):
    return pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(pattern), behavior="isolated"), byte_level(False)])


def llama3_pre():
    return split_pre(LLAMA3_PATTERN)


def build_spm_style_tiny():
    """A Llama-2-style tokenizer.json: ▁ normalizer, BPE with byte fallback, merges made the way HF's
    SentencePiece converter makes them (every a+b in the vocabulary, by the merged piece's rank)."""
    pieces = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(256)]
    pieces += ["\u2581", "h", "e", "l", "o", "w", "r", "d", "a", "b", "t", "n", "s", "i", "c", "f"]
    pieces += ["\u2581t", "he", "\u2581the", "in", "\u2581a", "ll", "el", "ell", "\u2581h", "\u2581hell",
               "\u2581hello", "\u2581w", "or", "\u2581wor", "ld", "\u2581world", "\u2581in", "is", "\u2581is",
               "at", "\u2581at", "an", "\u2581an", "\u2581\u2581", "\u2581\u2581\u2581\u2581", "ab", "ba", "aba",
               "\u2581s", "\u2581f", "\u2581c", "re", "\u2581re", "st", "\u2581st", "on", "\u2581on", "ce"]
    vocab = {p: i for i, p in enumerate(pieces)}
    merges = []
    for merged in pieces[3 + 256:]:
        for k in range(1, len(merged)):
            a, b = merged[:k], merged[k:]
            if a in vocab and b in vocab:
                merges.append((vocab[merged], vocab[a], vocab[b], a, b))
    merges.sort()
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[(a, b) for _, _, _, a, b in merges], unk_token="<unk>",
                               byte_fallback=True, fuse_unk=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")])
    tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in ("<unk>", "<s>", "</s>")])
    return tok


def build_gemma_style_tiny():
    """A Gemma-style tokenizer.json: spaces as ▁ but none prepended, BPE with byte fallback, newline and
    space-run pieces, <start_of_turn>/<end_of_turn> special tokens, ids 0-3 <pad> <eos> <bos> <unk> as
    Gemma's."""
    specials = ["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>"]
    pieces = specials + ["<0x%02X>" % b for b in range(256)]
    first_piece = len(pieces)
    pieces += ["\u2581", "\n", "h", "e", "l", "o", "w", "r", "d", "a", "b", "t", "n", "s", "i", "c", "f", "u", "m"]
    pieces += ["\u2581t", "he", "\u2581the", "in", "\u2581a", "ll", "el", "ell", "\u2581h", "\u2581hell",
               "\u2581hello", "hello", "\u2581w", "or", "\u2581wor", "ld", "\u2581world", "\u2581in", "is",
               "\u2581is", "\n\n", "\u2581\u2581", "\u2581\u2581\u2581\u2581", "us", "er", "user", "mo", "de",
               "model", "ab", "ba", "aba", "\u2581s", "\u2581f", "re", "st", "on", "ce"]
    vocab = {p: i for i, p in enumerate(pieces)}
    merges = []
    for merged in pieces[first_piece:]:
        for k in range(1, len(merged)):
            a, b = merged[:k], merged[k:]
            if a in vocab and b in vocab:
                merges.append((vocab[merged], vocab[a], vocab[b], a, b))
    merges.sort()
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[(a, b) for _, _, _, a, b in merges], unk_token="<unk>",
                               byte_fallback=True, fuse_unk=True))
    tok.normalizer = normalizers.Replace(" ", "\u2581")
    tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse()])
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in specials])
    return tok


def build_from_spm_gguf(path):
    """A SentencePiece BPE vocabulary in a GGUF (tokenizer.ggml.model = llama) as HF's converter builds it."""
    f = gguf.GGUFReader(path).fields
    pieces = f["tokenizer.ggml.tokens"].contents()
    scores = f["tokenizer.ggml.scores"].contents()
    types = f["tokenizer.ggml.token_type"].contents()
    assert f["tokenizer.ggml.add_space_prefix"].contents() is False
    vocab = {p: i for i, p in enumerate(pieces)}
    merges = []
    for merged, (score, ty) in enumerate(zip(scores, types)):
        if ty != 1:  # only normal pieces are merge results
            continue
        piece = pieces[merged]
        local = [(piece[:k], piece[k:]) for k in range(1, len(piece)) if piece[:k] in vocab and piece[k:] in vocab]
        local.sort(key=lambda ab: (vocab[ab[0]], vocab[ab[1]]))
        merges.extend((score, merged, a, b) for a, b in local)
    merges.sort(key=lambda m: (-m[0], m[1]))
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[(a, b) for _, _, a, b in merges], unk_token="<unk>",
                               byte_fallback=True, fuse_unk=True))
    tok.normalizer = normalizers.Replace(" ", "\u2581")
    tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse()])
    tok.add_special_tokens([AddedToken(p, special=True, normalized=False) for p, ty in zip(pieces, types) if ty == 3])
    tok.add_tokens([AddedToken(p, special=False, normalized=False) for p, ty in zip(pieces, types) if ty == 4])
    return tok


def write_case(f, variant, tok, text):
    ids = tok.encode(text).ids
    decoded = tok.decode(ids, skip_special_tokens=False)
    f.write("%s\t%s\t%s\t%s\n" % (variant, text.encode("utf-8").hex(), " ".join(map(str, ids)),
                                    decoded.encode("utf-8").hex()))


def main():
    tokens, types, merges, template = read_gguf(GGUF_PATH)
    smollm = build_bpe(tokens, types, merges, pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), byte_level(True)]))
    gpt2 = build_bpe(tokens, types, merges, byte_level(True))
    llama3 = build_bpe(tokens, types, merges, llama3_pre(), ignore_merges=True)
    qwen2 = build_bpe(tokens, types, merges, split_pre(QWEN2_PATTERN))

    corpus = CORPUS + random_corpus(150)

    # Sanity checks against ids known from SmolLM2's published tokenizer.
    assert smollm.encode("<|im_start|>").ids == [1], smollm.encode("<|im_start|>").ids
    assert smollm.encode("<|im_end|>").ids == [2]
    assert smollm.encode("<|endoftext|>").ids == [0]
    for text in corpus:
        ids = smollm.encode(text).ids
        assert smollm.decode(ids, skip_special_tokens=False) == text, text

    # A tiny HF tokenizer with the Llama 3 split, trained on the corpus.
    tiny = Tokenizer(models.BPE())
    tiny.pre_tokenizer = llama3_pre()
    tiny.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=420, special_tokens=["<|begin_of_text|>", "<|eot_id|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tiny.train_from_iterator(CORPUS * 3, trainer=trainer)
    tiny_dir = os.path.join(DATA, "tokenizer_golden_hf_tiny")
    os.makedirs(tiny_dir, exist_ok=True)
    tiny.save(os.path.join(tiny_dir, "tokenizer.json"))
    with open(os.path.join(tiny_dir, "tokenizer_config.json"), "w") as f:
        f.write('{"bos_token": "<|begin_of_text|>", "eos_token": {"content": "<|eot_id|>"}, '
                '"add_bos_token": true}\n')

    spm_tiny = build_spm_style_tiny()
    spm_dir = os.path.join(DATA, "tokenizer_golden_hf_spm_tiny")
    os.makedirs(spm_dir, exist_ok=True)
    spm_tiny.save(os.path.join(spm_dir, "tokenizer.json"))
    with open(os.path.join(spm_dir, "tokenizer_config.json"), "w") as f:
        f.write('{"bos_token": "<s>", "eos_token": "</s>", "add_bos_token": true}\n')
    spm_corpus = corpus + ["hello world", "the cat is at the world", "  the  hello", "abababa ba",
                           "</s>hello<s> world", "restore fonts once"]
    for text in spm_corpus:
        if "<s>" not in text and "</s>" not in text:  # a space is prepended after each special token
            assert spm_tiny.decode(spm_tiny.encode(text).ids, skip_special_tokens=False) == text, repr(text)

    gemma_tiny = build_gemma_style_tiny()
    gemma_dir = os.path.join(DATA, "tokenizer_golden_hf_gemma_tiny")
    os.makedirs(gemma_dir, exist_ok=True)
    gemma_tiny.save(os.path.join(gemma_dir, "tokenizer.json"))
    with open(os.path.join(gemma_dir, "tokenizer_config.json"), "w") as f:
        f.write('{"bos_token": "<bos>", "eos_token": "<eos>", "add_bos_token": true}\n')
    gemma_corpus = corpus + ["hello world", "the  hello\n\nworld", " leading", "<start_of_turn>user\nhello"
                             "<end_of_turn>\n<start_of_turn>model\n", "\u00e9t\u00e9 \u4e2d", "abababa ba  "]
    for text in gemma_corpus:
        assert gemma_tiny.decode(gemma_tiny.encode(text).ids, skip_special_tokens=False) == text, repr(text)

    gemma3 = build_from_spm_gguf(GEMMA_PATH) if os.path.exists(GEMMA_PATH) else None
    gemma3_corpus = gemma_corpus + ["<start_of_turn>user\nWhat is 2+2?<end_of_turn>\n<start_of_turn>model\n",
                                    "Das Gebäude, l'été — 東京タワー\n\n\n  x", "</footer><div>\t\tcode</div>"]

    with open(os.path.join(DATA, "tokenizer_golden.txt"), "w") as f:
        f.write("# Generated by scripts/gen_tokenizer_golden.py with tokenizers %s from %s.\n"
                % (__import__("tokenizers").__version__, os.path.basename(GGUF_PATH)))
        f.write("# variant<TAB>hex(utf-8 text)<TAB>token ids (special tokens parsed)<TAB>hex(decoded ids)\n")
        for name, tok in (("smollm", smollm), ("gpt2", gpt2), ("llama3", llama3), ("qwen2", qwen2),
                          ("hf_tiny", tiny)):
            for text in corpus:
                ids = tok.encode(text).ids
                write_case(f, name, tok, text)
        for text in spm_corpus:
            write_case(f, "hf_spm_tiny", spm_tiny, text)
        for text in gemma_corpus:
            write_case(f, "hf_gemma_tiny", gemma_tiny, text)
        if gemma3 is None:
            print("no %s: the gemma3 cases are left out" % GEMMA_PATH)
        else:
            for text in gemma3_corpus:
                write_case(f, "gemma3", gemma3, text)

    # ChatML: SmolLM2's own template rendered by jinja2.
    env = jinja2.Environment()
    tmpl = env.from_string(template)
    conversations = {
        "with_system": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Hi! What is 2+2?"},
            {"role": "assistant", "content": "4."},
            {"role": "user", "content": "And 3+3?"},
        ],
        "default_system": [
            {"role": "user", "content": "Hello"},
            {"role": "assistant", "content": "Hi there, how can I help?"},
            {"role": "user", "content": "Tell me a joke.\nA short one."},
        ],
    }
    with open(os.path.join(DATA, "tokenizer_golden_chat.txt"), "w") as f:
        f.write("# Generated by scripts/gen_tokenizer_golden.py: SmolLM2's chat_template and the published "
                "templates of Llama 2, Llama 3, Qwen 2.5, Phi-3 and Gemma 3 rendered by jinja2 %s.\n"
                % jinja2.__version__)
        f.write("# name<TAB>hex(rendered text); add_generation_prompt=True\n")
        for name, msgs in conversations.items():
            text = tmpl.render(messages=msgs, add_generation_prompt=True)
            f.write("chatml_%s\t%s\n" % (name, text.encode("utf-8").hex()))
        llama2 = env.from_string(LLAMA2_TEMPLATE)
        llama3 = env.from_string(LLAMA3_TEMPLATE)
        for name, msgs in conversations.items():
            text = llama2.render(messages=msgs, add_generation_prompt=True, bos_token="<s>", eos_token="</s>",
                                 raise_exception=raise_exception)
            f.write("llama2_%s\t%s\n" % (name, text.encode("utf-8").hex()))
            text = llama3.render(messages=msgs, add_generation_prompt=True, bos_token="<|begin_of_text|>")
            f.write("llama3_%s\t%s\n" % (name, text.encode("utf-8").hex()))
        qwen25 = env.from_string(QWEN25_TEMPLATE)
        phi3 = env.from_string(PHI3_TEMPLATE)
        gemma3 = env.from_string(GEMMA3_TEMPLATE)
        for name, msgs in conversations.items():
            text = qwen25.render(messages=msgs, add_generation_prompt=True)
            f.write("qwen25_%s\t%s\n" % (name, text.encode("utf-8").hex()))
            for prompt in (True, False):
                text = phi3.render(messages=msgs, add_generation_prompt=prompt, eos_token="<|endoftext|>")
                f.write("phi3_%s%s\t%s\n" % (name, "" if prompt else "_closed", text.encode("utf-8").hex()))
            text = gemma3.render(messages=msgs, add_generation_prompt=True, bos_token="<bos>",
                                 raise_exception=raise_exception)
            f.write("gemma3_%s\t%s\n" % (name, text.encode("utf-8").hex()))
    print("wrote", len(corpus), "cases per variant")


if __name__ == "__main__":
    main()
