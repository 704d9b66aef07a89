#!/usr/bin/env bash
# `kiln tokenize`: ids for text and stdin, the klein template with diffusers and ComfyUI padding, --verbose,
# --jsonl, and clear errors (invalid UTF-8, bad options, a missing tokenizer file). Expected ids are HF
# tokenizers' (the same as tests/data/tokenizer/qwen3_corpus.jsonl).
set -u
kiln=${KILN_BIN:?KILN_BIN not set}
fails=0
check() { # name, expected, actual
  if [ "$2" == "$3" ]; then echo "ok $1"; else echo "not ok $1: expected [$2] got [$3]"; fails=$((fails + 1)); fi
}

check plain "64 2518 38835" "$("$kiln" tokenize "a red fox")"
check stdin "64 2518 38835" "$(printf 'a red fox' | "$kiln" tokenize)"
check contraction "15007 944" "$("$kiln" tokenize "don't")"
check specials "151644 872 198 87 151645" "$("$kiln" tokenize $'<|im_start|>user\nx<|im_end|>')"

out=$("$kiln" tokenize --template klein "")
check klein-count 512 "$(wc -w <<<"$out")"
check klein-head "151644 872 198 151645 198 151644 77091 198 151667 271 151668 271 151643" "$(cut -d' ' -f1-13 <<<"$out")"
check klein-pad-tail 151643 "$(awk '{print $512}' <<<"$out")"

long=$(for i in $(seq 1 300); do printf 'red fox %d, ' "$i"; done)
check diffusers-truncates 512 "$("$kiln" tokenize --template klein "$long" | wc -w)"
n_comfy=$("$kiln" tokenize --template klein --comfy "$long" | wc -w)
check comfy-never-truncates 1 "$([ "$n_comfy" -gt 512 ] && echo 1 || echo 0)"
check comfy-pads "512" "$("$kiln" tokenize --template klein --comfy "short" | wc -w)"
check no-pad 15 "$("$kiln" tokenize --template klein --no-pad "fox, red" | wc -w)"
check max-length 20 "$("$kiln" tokenize --template klein --max-length 20 "a red fox" | wc -w)"

verbose=$("$kiln" tokenize --template klein --verbose "a red fox")
check verbose-piece 1 "$(grep -c $'^5\t38835\t" fox"$' <<<"$verbose")"
check verbose-newline 1 "$(grep -c $'^2\t198\t"\\\\n"$' <<<"$verbose")"
check verbose-padding 1 "$(grep -c 'padding (mask 0)' <<<"$verbose")"

check jsonl $'64 2518 38835\n15007 944' "$(printf '"a red fox"\n"don\x27t"\n' | "$kiln" tokenize --jsonl)"

err=$(printf 'ok \xff' | "$kiln" tokenize 2>&1 >/dev/null); rc=$?
check invalid-utf8-rc 2 "$rc"
check invalid-utf8-msg 1 "$(grep -c 'not valid UTF-8: byte 0xff at offset 3' <<<"$err")"
"$kiln" tokenize --template bogus x >/dev/null 2>&1; check bad-template-rc 2 $?
"$kiln" tokenize --frobnicate >/dev/null 2>&1; check bad-option-rc 2 $?
"$kiln" tokenize --tokenizer /nonexistent/tokenizer.json x >/dev/null 2>&1; check missing-file-rc 3 $?
check data-dir-fallback "64 2518 38835" "$(KILN_DATA_DIR=/nonexistent "$kiln" tokenize "a red fox")"
"$kiln" tokenize --help | grep -q -- '--template' ; check help 0 $?

# FLUX.1's tokenizers (ids from transformers CLIPTokenizer / T5TokenizerFast, with their special tokens)
check clip "49406 320 1125 539 320 2368 49407" "$("$kiln" tokenize --tokenizer clip-l "a photo of a CAT")"
check clip-pad 77 "$("$kiln" tokenize --tokenizer clip-l --pad "a cat" | wc -w)"
check clip-pad-tail "49407" "$("$kiln" tokenize --tokenizer clip-l --pad "a cat" | awk '{print $77}')"
check clip-truncates "49407" "$("$kiln" tokenize --tokenizer clip-l --pad "$long" | awk '{print NF == 77 ? $77 : "bad"}')"
check t5 "3 9 1712 1" "$("$kiln" tokenize --tokenizer t5 "a cat")"
check t5-dev 512 "$("$kiln" tokenize --tokenizer t5 --pad "a cat" | wc -w)"
check t5-schnell 256 "$("$kiln" tokenize --tokenizer t5 --pad --max-length 256 "a cat" | wc -w)"
check t5-folder "3 9 1712 1" "$("$kiln" tokenize --tokenizer "$KILN_SOURCE_DIR/data/tokenizer/t5" "a cat")"
check clip-folder "49406 320 2368 49407" "$("$kiln" tokenize --tokenizer "$KILN_SOURCE_DIR/data/tokenizer/clip-l" "a cat")"
check t5-verbose 1 "$("$kiln" tokenize --tokenizer t5 -v "a cat" | grep -c $'^2\t1712\t"\xe2\x96\x81cat"$')"
"$kiln" tokenize --tokenizer t5 --template klein x >/dev/null 2>&1; check t5-klein-refused 7 $?

[ "$fails" -eq 0 ] && echo "tokenize: all passed" || echo "tokenize: $fails failed"
exit $((fails > 0))
