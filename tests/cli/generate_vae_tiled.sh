#!/usr/bin/env bash
# kiln generate --vae-tile: the tiled VAE decode through the CLI on the tiny model. 8-latent tiles over a
# 16x16 latent (3x3 tiles) give a different image from the untiled one; a tile covering the latent (24: one
# tile) gives the untiled image byte for byte; bad tile sizes exit 2. (Tiled against diffusers' own tiled decode:
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
for bad in 6 10 abc; do
    gen --vae-tile "$bad" -o "$tmp/bad.png" 2>/dev/null
    rc=$?
    if [ "$rc" -eq 2 ]; then echo "ok --vae-tile $bad: exit 2"; else echo "FAIL --vae-tile $bad: exit $rc, want 2"; fail=1; fi
done
exit $fail
