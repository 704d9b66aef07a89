#!/usr/bin/env bash
# kiln inspect on GGUF and fp8 files: the valid tiny GGUF from the gguf package (types, PyTorch-order shapes,
# detected FLUX.2 family, every metadata value), each corrupt seed of the fuzz_gguf corpus (exit 4 and its
# message), ComfyUI/BFL fp8 (layout line) and an NVFP4 file (named on an "unsupported:" line, exit 0), --json.
set -u
bin=${KILN_BIN:?KILN_BIN not set}
src=${KILN_SOURCE_DIR:?KILN_SOURCE_DIR not set}
corpus=$src/tests/fuzz/corpus/fuzz_gguf
data=$src/tests/data/gguf
fail=0

expect() { # expect FILE CODE MESSAGE
    local out rc
    out=$("$bin" inspect --summary "$1" 2>&1 >/dev/null)
    rc=$?
    if [ "$rc" -ne "$2" ]; then echo "FAIL $1: exit $rc, want $2 ($out)"; fail=1; return; fi
    if [ -n "$3" ] && ! grep -qF -- "$3" <<<"$out"; then echo "FAIL $1: message '$out' lacks '$3'"; fail=1; return; fi
    echo "ok $(basename "$1") -> $rc"
}
has() { # has TEXT NEEDLE
    if grep -qF -- "$2" <<<"$1"; then echo "ok has '$2'"; else echo "FAIL output lacks '$2'"; fail=1; fi
}

expect "$corpus/bad_magic.gguf" 4 'not a GGUF file (starts with 47 47 55 47'
expect "$corpus/truncated.gguf" 4 "runs past the end of the file"
expect "$corpus/kv_count_past_end.gguf" 4 "1099511627776 metadata entries cannot fit"
expect "$corpus/tensor_count_past_end.gguf" 4 "tensor infos cannot fit"
expect "$corpus/misaligned.gguf" 4 "starts at data offset 4, not a multiple of the alignment 32"
expect "$corpus/unknown_type.gguf" 4 "tensor 'a.weight' has unknown GGML type 99"
expect "$corpus/overlap.gguf" 4 "tensors 'a.weight' [0, 68) and 'b.weight' [32, 66) overlap"
expect "$corpus/data_past_end.gguf" 4 "tensor 'a.weight' (68 bytes at data offset 0, file offset 160) runs past the end"
expect "$corpus/bad_alignment.gguf" 4 "general.alignment 48 is not a power of two"
for g in small v2 array_of_strings tiny iq2_xxs; do expect "$corpus/$g.gguf" 0 ""; done
has "$("$bin" inspect --summary "$corpus/iq2_xxs.gguf")" "unsupported: tensor types kiln cannot dequantise: IQ2_XXS x 1"
expect "$data/fp8-bad-scale.safetensors" 4 "scale 'img_in.weight_scale' has shape [2, 3]; a per-tensor scale holds one value"

out=$("$bin" inspect "$data/tiny.gguf")
has "$out" "format:     GGUF v3, alignment 64, data from byte 1216"
has "$out" "model:      flux2-dit (FLUX.2 DiT, hidden 64, 2 double + 1 single blocks, text width 512)"
has "$out" "types:      F32 x 1 F16 x 1 Q8_0 x 2 Q4_K x 2 Q6_K x 1 BF16 x 1"
has "$out" 'test.arr_str (array) = ["a", "", "über"] (3 x string)'
has "$out" "test.u64 (u64) = 18000000000000000000"
has "$out" "txt_in.weight                                                Q4_K     [64, 512]              18432"

json=$("$bin" inspect --json --summary "$data/tiny.gguf")
has "$json" '"format": "gguf"'
has "$json" '"Q6_K": 1'
has "$json" '"architecture": "flux2"'

out=$("$bin" inspect --summary "$data/fp8-comfy-quant.safetensors")
has "$out" "fp8:        comfy-quant layout: e4m3 x 5, e5m2 x 0, weight scales x 5, input scales x 5, per-layer declarations x 5 (_quantization_metadata)"
out=$("$bin" inspect --summary "$data/fp8-nvfp4.safetensors"); rc=$?
has "$out" "unsupported: $data/fp8-nvfp4.safetensors: layer 'img_in' uses quantisation format 'nvfp4'"
[ "$rc" -eq 0 ] && echo "ok nvfp4 listed, exit 0" || { echo "FAIL nvfp4 inspect exit $rc"; fail=1; }

# text encoders in llama.cpp's naming (tests/data/gguf/te): detected from their metadata, the name map said
out=$("$bin" inspect --summary "$data/te/qwen3-q-q4_k.gguf")
has "$out" "model:      qwen3 (Qwen3 text encoder (llama.cpp GGUF), hidden 256, 27 layers, 2 q / 1 kv heads x 16"
has "$out" "layout:     llama.cpp    architecture: qwen3"
has "$out" "types:      F32 x 109 Q5_0 x 54 Q4_K x 136"
has "$out" "text encoder: llama.cpp names, read as transformers names (blk.N.* -> model.layers.N.*); the tokenizer stored in the file is not used"
json=$("$bin" inspect --summary --json "$data/te/t5-tiny-q8_0.gguf")
has "$json" '"family": "t5-encoder"'
has "$json" '"layout": "llama.cpp"'

# a folder: its .gguf files are found beside the safetensors ones (3 here, 10 text encoders in te/: folders are
# walked)
n=$("$bin" inspect --summary --json "$data" | grep -c '"model"')
[ "$n" -eq 13 ] && echo "ok folder: 13 checkpoints (and one error)" || { echo "FAIL folder listed $n checkpoints, want 13"; fail=1; }
exit $fail
