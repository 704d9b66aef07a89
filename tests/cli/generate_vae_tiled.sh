#!/usr/bin/env bash
# kiln generate --vae-tile: the tiled VAE decode through the CLI on the tiny model. 8-latent tiles over a
# 16x16 latent (3x3 tiles) give a different image from the untiled one; a tile covering the latent (24: one
# tile) gives the untiled image byte for byte; bad tile sizes exit 2. The same for FLUX.1 [dev] (its decode is the
# shared pipeline/decode_batch.c with FLUX.1's latent rule; until session 10 FLUX.1 ignored --vae-tile). No PSNR
# bound between tiled and untiled here: the tiny random models' images are near-flat, so two different seeds
# already differ by less than tiles do (25 vs 16 dB); the tiles' error is bounded against diffusers in
# test_models_vae_tiled. (Tiled against diffusers' own tiled decode:
# test_models_vae_tiled; its memory bound: test_pipeline_vae_tiled_mem.)
set -u
bin=${KILN_BIN:?KILN_BIN not set}
src=${KILN_SOURCE_DIR:?KILN_SOURCE_DIR not set}
tiny=$src/tests/data/tiny
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export KILN_THREADS=${KILN_THREADS:-2}
gen() { "$bin" generate -q -p "a red fox" --model "$tiny/diffusers" -W 128 -H 128 --seed 5 "$@"; }

gen --vae-tile off -o "$tmp/off.png" || { echo "FAIL untiled generate"; fail=1; }
gen --vae-tile 8 -o "$tmp/t8.png" || { echo "FAIL --vae-tile 8"; fail=1; }
gen --vae-tile 24 -o "$tmp/t24.png" || { echo "FAIL --vae-tile 24"; fail=1; }
if cmp -s "$tmp/off.png" "$tmp/t8.png"; then echo "FAIL 3x3 tiles gave the untiled image"; fail=1
else echo "ok 3x3 tiles differ from the untiled decode"; fi
if cmp -s "$tmp/off.png" "$tmp/t24.png"; then echo "ok one tile covering the latent = the untiled image"
else echo "FAIL one covering tile differs from the untiled decode"; fail=1; fi
gen1() { "$bin" generate -q -p "a red fox" --model "$tiny/flux1/dev" -W 128 -H 128 --steps 2 --seed 5 "$@"; }
gen1 --vae-tile off -o "$tmp/f1-off.png" || { echo "FAIL FLUX.1 untiled generate"; fail=1; }
gen1 --vae-tile 8 -o "$tmp/f1-t8.png" || { echo "FAIL FLUX.1 --vae-tile 8"; fail=1; }
gen1 --vae-tile 24 -o "$tmp/f1-t24.png" || { echo "FAIL FLUX.1 --vae-tile 24"; fail=1; }
if cmp -s "$tmp/f1-off.png" "$tmp/f1-t24.png"; then echo "ok FLUX.1: one tile covering the latent = the untiled image"
else echo "FAIL FLUX.1: one covering tile differs from the untiled decode"; fail=1; fi
if cmp -s "$tmp/f1-off.png" "$tmp/f1-t8.png"; then echo "FAIL FLUX.1: 3x3 tiles gave the untiled image"; fail=1
else echo "ok FLUX.1: 3x3 tiles differ from the untiled decode"; fi
gen1 --vae-tile 10 -o "$tmp/bad.png" 2>/dev/null
rc=$?
if [ "$rc" -eq 2 ]; then echo "ok FLUX.1 --vae-tile 10: exit 2"; else echo "FAIL FLUX.1 --vae-tile 10: exit $rc, want 2"; fail=1; fi
for bad in 6 10 abc; do
    gen --vae-tile "$bad" -o "$tmp/bad.png" 2>/dev/null
    rc=$?
    if [ "$rc" -eq 2 ]; then echo "ok --vae-tile $bad: exit 2"; else echo "FAIL --vae-tile $bad: exit $rc, want 2"; fail=1; fi
done
exit $fail
