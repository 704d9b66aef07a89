#!/usr/bin/env bash
# kiln generate --ref / --init / --strength on the tiny models: the output takes the first reference's prepared
# size (100x72 -> 96x64) and the init image's, also on the 9B-KV folder (whose edit differs from klein 9B's);
# img2img at strength 0.5 of 4 steps runs 2 (perf dump); bad images get a clear error, exit 4/6, and no output
# file is written (truncated PNG, a 30000x30000 header, a text file); flag misuse (--strength without --init, out
# of range, -W without -H) exits 2.
set -u
bin=${KILN_BIN:?KILN_BIN not set}
src=${KILN_SOURCE_DIR:?KILN_SOURCE_DIR not set}
tiny=$src/tests/data/tiny
img=$src/tests/data/images
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export KILN_THREADS=${KILN_THREADS:-2}

expect() { # expect CODE MESSAGE -- ARGS...
    local code=$1 msg=$2 out rc
    shift 3
    out=$("$bin" generate -q "$@" 2>&1 >/dev/null)
    rc=$?
    if [ "$rc" -ne "$code" ]; then echo "FAIL generate $*: exit $rc, want $code ($out)"; fail=1; return; fi
    if [ -n "$msg" ] && ! grep -qF -- "$msg" <<<"$out"; then echo "FAIL generate $*: '$out' lacks '$msg'"; fail=1; return; fi
    echo "ok exit $rc: ${msg:-success}"
}
size_of() { # width height from the PNG's IHDR
    od -An -tu1 -j16 -N8 "$1" | awk '{print $1*16777216+$2*65536+$3*256+$4 "x" $5*16777216+$6*65536+$7*256+$8}'
}

m=(--model "$tiny/diffusers")
expect 0 "" -- -p "a red fox" "${m[@]}" --ref "$img/ref-100x72.png" --seed 3 -o "$tmp/e.png"
[ "$(size_of "$tmp/e.png")" = "96x64" ] || { echo "FAIL edit output $(size_of "$tmp/e.png"), want 96x64"; fail=1; }
expect 0 "" -- -p "a red fox" "${m[@]}" --ref "$img/ref-90x70.png" --ref "$img/ref-70x150.png" -W 64 -H 48 -o "$tmp/e2.png"
[ "$(size_of "$tmp/e2.png")" = "64x48" ] || { echo "FAIL edit output $(size_of "$tmp/e2.png"), want 64x48"; fail=1; }
expect 0 "" -- -p "a red fox" "${m[@]}" --init "$img/init-96x64.png" --strength 0.5 -o "$tmp/i.png" --perf-dump "$tmp/p.json"
[ "$(size_of "$tmp/i.png")" = "96x64" ] || { echo "FAIL img2img output $(size_of "$tmp/i.png"), want 96x64"; fail=1; }
[ "$(grep -c '"step":' "$tmp/p.json")" -eq 2 ] || { echo "FAIL strength 0.5 of 4 steps should run 2"; fail=1; }

# klein 9B-KV (Flux2KleinKVPipeline folder): the same CLI; its reference cache makes another image than the 9B
# folder's Flux2KleinPipeline edit from the same weights, reference and seed
expect 0 "" -- -p "a red fox" --model "$tiny/diffusers-9b-kv" --ref "$img/ref-100x72.png" --seed 3 -o "$tmp/kv.png"
[ "$(size_of "$tmp/kv.png")" = "96x64" ] || { echo "FAIL KV edit output $(size_of "$tmp/kv.png"), want 96x64"; fail=1; }
expect 0 "" -- -p "a red fox" --model "$tiny/diffusers-9b" --ref "$img/ref-100x72.png" --seed 3 -o "$tmp/k9.png"
cmp -s "$tmp/kv.png" "$tmp/k9.png" && { echo "FAIL the KV folder's edit equals klein 9B's"; fail=1; }

# bad uploads: a clear error, nothing written
for case in "bad-truncated.png:4:truncated" "bad-30000x30000.png:6:30000x30000" "bad-not-an-image.png:4:not an image" \
            "bad-truncated.jpg:4:Premature end" "bad-truncated.webp:4:webp"; do
    f=${case%%:*}; rest=${case#*:}; code=${rest%%:*}; msg=${rest#*:}
    expect "$code" "$msg" -- -p x "${m[@]}" --ref "$img/$f" -o "$tmp/bad.png"
    expect "$code" "$msg" -- -p x "${m[@]}" --init "$img/$f" -o "$tmp/bad.png"
done
[ -e "$tmp/bad.png" ] && { echo "FAIL a bad image left an output file"; fail=1; }
expect 3 "no-such.png" -- -p x "${m[@]}" --ref "$tmp/no-such.png" -o "$tmp/bad.png"
expect 2 "at least 64" -- -p x "${m[@]}" --ref "$img/rgb.png" -o "$tmp/bad.png"
expect 2 "--strength needs --init" -- -p x "${m[@]}" --strength 0.5 -o "$tmp/bad.png"
expect 2 "must be a number in (0, 1]" -- -p x "${m[@]}" --init "$img/init-96x64.png" --strength 1.5 -o "$tmp/bad.png"
expect 2 "both -W and -H" -- -p x "${m[@]}" --ref "$img/ref-100x72.png" -W 64 -o "$tmp/bad.png"
expect 2 "resize the init image" -- -p x "${m[@]}" --init "$img/init-96x64.png" -W 64 -H 64 -o "$tmp/bad.png"
[ -e "$tmp/bad.png" ] && { echo "FAIL a refused request left an output file"; fail=1; }
exit $fail
