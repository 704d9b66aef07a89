#!/usr/bin/env bash
# kiln over several MPI ranks (docs/parallel.md), oversubscribed on a small machine:
# - every collective of the MPI communicator at 2 and 4 ranks (test_compute_comm under mpirun);
# - failure drills: a rank that hangs makes the others time out and abort the job (exit 6, "timed out"), a rank
#   that dies ends the job - both within seconds, never a hang;
# - `mpirun -np 2` and `-np 4` of `kiln generate` (tiled VAE decode distributed over the ranks, gathered on
#   rank 0; the DiT sequence parallel over 2 ranks - Ulysses, models/dit_ulysses.h - and replicated over 4, whose
#   count does not divide the tiny DiT's 2 heads) write the single-rank image byte for byte, and only rank 0
#   writes; klein base with CFG (two samples per DiT batch) the same over 2 ranks;
# - FLUX.1 with sequence parallelism over 2 and 4 ranks (a 4-head copy of the tiny [dev] DiT): byte-identical;
# - tensor parallelism (--tp, docs/parallel.md) on a 4-head copy of the tiny DiT (tests/py/dit_regroup_heads.py):
#   TP 2 over 2 ranks, SP 2 x TP 2 over 4, TP 4 over 4, and klein base with CFG at TP 2, each >= 60 dB from the
#   single-rank --exact image (TP's all-reduce sums the K dimension in another order: not bit-identical), and SP
#   over 4 still byte-identical on that model; refusals (--tp not dividing the ranks, the heads); a rank stopped or
#   killed in the middle of a TP generate ends every rank within seconds, with the time-out's message.
# Needs Open MPI (scripts/install-deps.sh). Everything runs under `timeout` so that a hang fails, not blocks.
set -u
bin=${KILN_BIN:?KILN_BIN not set}
src=${KILN_SOURCE_DIR:?KILN_SOURCE_DIR not set}
tiny=$src/tests/data/tiny
comm_test=${KILN_COMM_TEST:-$(dirname "$bin")/test_compute_comm}
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
command -v mpirun >/dev/null || { echo "FAIL mpirun not found (scripts/install-deps.sh installs openmpi-bin)"; exit 1; }
# root in containers and CI; one thread per rank so that ranks do not fight over the cores
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 KILN_THREADS=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
# LeakSanitizer would report Open MPI's own allocations at exit (the ASan build runs this too)
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0
# MPI_TIMEOUT: seconds before a run counts as hung (the failure drills set less: they must end within seconds)
mpi() { local np=$1; shift; timeout "${MPI_TIMEOUT:-120}" mpirun --oversubscribe -np "$np" -x KILN_THREADS -x ASAN_OPTIONS "$@"; }

for np in 2 4; do
    out=$(mpi "$np" "$comm_test" 2>&1)
    n=$(grep -c "every collective ok" <<<"$out")
    if [ "$n" -eq "$np" ]; then echo "ok $np ranks: every collective"; else echo "FAIL $np ranks: $n ok ($out)"; fail=1; fi
done

t0=$(date +%s)
out=$(MPI_TIMEOUT=45 KILN_COMM_TIMEOUT=2 KILN_COMM_TEST_HANG_RANK=1 mpi 2 -x KILN_COMM_TIMEOUT -x KILN_COMM_TEST_HANG_RANK "$comm_test" 2>&1)
rc=$?
el=$(( $(date +%s) - t0 ))
if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && grep -q "barrier timed out" <<<"$out" && [ "$el" -lt 40 ]; then
    echo "ok a hung rank: the job aborts with 'timed out' (exit $rc, ${el}s)"
else echo "FAIL a hung rank: exit $rc after ${el}s: $out"; fail=1; fi
t0=$(date +%s)
out=$(KILN_COMM_TEST_DIE_RANK=1 mpi 3 -x KILN_COMM_TEST_DIE_RANK "$comm_test" 2>&1)
rc=$?
el=$(( $(date +%s) - t0 ))
if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && grep -q "Exit code: *3" <<<"$out" && [ "$el" -lt 60 ]; then
    echo "ok a dead rank: the job ends (exit $rc, ${el}s)"
else echo "FAIL a dead rank: exit $rc after ${el}s: $out"; fail=1; fi

gen=(generate -q -p "a red fox" --model "$tiny/diffusers" -W 128 -H 128 --seed 5 --vae-tile 8 --exact)
"$bin" "${gen[@]}" -o "$tmp/one.png" || { echo "FAIL single-rank generate"; fail=1; }
for np in 2 4; do
    mkdir -p "$tmp/np$np" && cd "$tmp/np$np" || exit 1
    # without -q each writing rank prints "PATH (seed S)" on stdout: exactly one may
    KILN_LOG=info mpi "$np" -x KILN_LOG "$bin" "${gen[@]:0:1}" "${gen[@]:2}" -o "$tmp/np$np/out.png" \
        --perf-dump "$tmp/np$np/perf.json" >"$tmp/stdout$np" 2>"$tmp/stderr$np" || { echo "FAIL mpirun -np $np generate"; fail=1; }
    # the tiny DiT has 2 heads: Ulysses over 2 ranks; 4 ranks do not divide them, so each runs the whole DiT
    want="sequence parallelism (Ulysses): 2 ranks x 32 image tokens"
    [ "$np" -eq 4 ] && want="heads are not divisible by 4; every rank runs the whole DiT"
    grep -qF "$want" "$tmp/stderr$np" && echo "ok -np $np: $want" || { echo "FAIL -np $np: no '$want'"; fail=1; }
    writers=$(grep -c "out.png (seed" "$tmp/stdout$np")
    [ "$writers" -eq 1 ] || { echo "FAIL -np $np: $writers ranks wrote the image"; fail=1; }
    if cmp -s "$tmp/one.png" "$tmp/np$np/out.png"; then echo "ok -np $np: the single-rank image, byte for byte"
    else echo "FAIL -np $np: the image differs from the single-rank one"; fail=1; fi
    [ "$(ls "$tmp/np$np" | wc -l)" -eq 2 ] || { echo "FAIL -np $np: ranks other than 0 wrote files: $(ls "$tmp/np$np")"; fail=1; }
done
# klein base with CFG (a DiT batch of 2: each sample's tokens split separately), 3 steps, 128x96
base=(generate -q -p "a red fox" --model "$tiny/diffusers-base" -W 128 -H 96 --seed 5 --steps 3 --guidance 3 --vae-tile 8 --exact)
"$bin" "${base[@]}" -o "$tmp/base1.png" || { echo "FAIL single-rank base generate"; fail=1; }
mkdir -p "$tmp/base2" && cd "$tmp/base2" && mpi 2 "$bin" "${base[@]}" -o "$tmp/base2/out.png" || { echo "FAIL -np 2 base"; fail=1; }
if cmp -s "$tmp/base1.png" "$tmp/base2/out.png"; then echo "ok -np 2 base + CFG, sequence parallel: the single-rank image"
else echo "FAIL -np 2 base + CFG: the image differs from the single-rank one"; fail=1; fi

# --- FLUX.1 sequence parallelism: the tiny [dev] DiT's one head of 128 cut into 4 of 32 (dit_regroup_heads.py), a
# batch of 2, over 2 and 4 ranks: the single-rank images byte for byte
python3 "$src/tests/py/dit_regroup_heads.py" "$tiny/flux1/dev" "$tmp/f1h4" 32 || { echo "FAIL making the 4-head FLUX.1 DiT"; exit 1; }
f1=(generate -q -p "a red fox" --model "$tmp/f1h4" -W 96 -H 64 --steps 2 --seed 5 -n 2 --exact)
"$bin" "${f1[@]}" -o "$tmp/f1one.png" || { echo "FAIL single-rank FLUX.1"; fail=1; }
for np in 2 4; do
    mkdir -p "$tmp/f1np$np" && cd "$tmp/f1np$np" || exit 1
    KILN_LOG=info mpi "$np" -x KILN_LOG "$bin" "${f1[@]}" -o out.png 2>err.txt || { echo "FAIL FLUX.1 -np $np"; fail=1; }
    want="sequence parallelism (Ulysses): $np ranks x $((24 / np)) image tokens"
    grep -qF "$want" err.txt || { echo "FAIL FLUX.1 -np $np: no '$want'"; fail=1; }
    if cmp -s "$tmp/f1one.png" out.png && cmp -s "$tmp/f1one-1.png" out-1.png; then
        echo "ok FLUX.1 -np $np, batch 2, sequence parallel: the single-rank images, byte for byte"
    else echo "FAIL FLUX.1 -np $np: the images differ from the single-rank ones"; fail=1; fi
done

# --- tensor parallelism ----------------------------------------------------------------------------------------
psnr() { python3 "$src/tests/py/png_psnr.py" "$1" "$2"; }
atleast60() { [ "$1" = inf ] || python3 -c 'import sys; sys.exit(float(sys.argv[1]) < 60)' "$1"; }
python3 "$src/tests/py/dit_regroup_heads.py" "$tiny/diffusers" "$tmp/h4" 16 || { echo "FAIL making the 4-head DiT"; exit 1; }
h4=(generate -q -p "a red fox" --model "$tmp/h4" -W 128 -H 128 --seed 5 --vae-tile 8 --exact)
"$bin" "${h4[@]}" -o "$tmp/h4one.png" || { echo "FAIL single-rank generate, 4 heads"; fail=1; }
tp_case() { # NAME NP WANT-LOG ARGS...: the image of mpirun -np NP against the single-rank one
    local name=$1 np=$2 want=$3 ref=$tmp/h4one.png; shift 3
    [ "$name" = base ] && ref=$tmp/h4base.png
    mkdir -p "$tmp/tp_$name" && cd "$tmp/tp_$name" || exit 1
    if ! KILN_LOG=info mpi "$np" -x KILN_LOG "$bin" "$@" -o out.png 2>err.txt; then
        echo "FAIL tp $name: mpirun -np $np failed: $(tail -3 err.txt)"; fail=1; return; fi
    grep -qF "$want" err.txt || { echo "FAIL tp $name: no '$want' in the log"; fail=1; }
    [ "$(ls | wc -l)" -eq 2 ] || { echo "FAIL tp $name: ranks other than 0 wrote files: $(ls)"; fail=1; }
    local p; p=$(psnr "$ref" out.png) || { echo "FAIL tp $name: cannot compare"; fail=1; return; }
    if [ "$name" = sp4 ]; then # sequence parallelism alone stays bitwise
        [ "$p" = inf ] && echo "ok $name: byte-identical image (PSNR inf)" || { echo "FAIL $name: PSNR $p, not identical"; fail=1; }
    elif atleast60 "$p"; then echo "ok tp $name (-np $np): PSNR $p dB >= 60 against one rank"
    else echo "FAIL tp $name (-np $np): PSNR $p dB < 60"; fail=1; fi
}
tp_case tp2 2 "tensor parallelism: 2 ranks x 2 heads" "${h4[@]}" --tp 2
tp_case sp2tp2 4 "sequence parallelism (Ulysses): 2 ranks x 32 image tokens" "${h4[@]}" --tp 2
grep -qF "tensor parallelism: 2 ranks x 2 heads" "$tmp/tp_sp2tp2/err.txt" || { echo "FAIL sp2tp2: TP not on"; fail=1; }
tp_case tp4 4 "tensor parallelism: 4 ranks x 1 heads" "${h4[@]}" --tp 4
tp_case sp4 4 "sequence parallelism (Ulysses): 4 ranks x 16 image tokens" "${h4[@]}"
h4b=(generate -q -p "a red fox" --model "$tmp/h4" --base -W 128 -H 96 --seed 5 --steps 3 --guidance 3 --vae-tile 8 --exact)
"$bin" "${h4b[@]}" -o "$tmp/h4base.png" || { echo "FAIL single-rank base, 4 heads"; fail=1; }
tp_case base 2 "tensor parallelism: 2 ranks x 2 heads" "${h4b[@]}" --tp 2
# refusals, named
cd "$tmp" || exit 1
out=$(mpi 2 "$bin" "${h4[@]}" --tp 4 -o "$tmp/r.png" 2>&1)
grep -q "tensor parallelism of degree 4: the 2 ranks are not a multiple of it" <<<"$out" && echo "ok --tp 4 over 2 ranks refused" \
    || { echo "FAIL --tp 4 over 2 ranks: $out"; fail=1; }
out=$(mpi 4 "$bin" "${gen[@]}" --tp 4 -o "$tmp/r.png" 2>&1)
grep -q "DiT's 2 heads and 192 MLP units are not both divisible by 4" <<<"$out" && echo "ok --tp 4 on a 2-head DiT refused" \
    || { echo "FAIL --tp 4 on 2 heads: $out"; fail=1; }
# a rank that stops (SIGSTOP: hung) or is killed in the middle of a TP generate: every rank ends within seconds
long=(generate -q -p "a red fox" --model "$tmp/h4" -W 256 -H 256 --seed 5 --steps 20 --tp 2)
for sig in STOP KILL; do
    mkdir -p "$tmp/drill$sig" && cd "$tmp/drill$sig" || exit 1
    # (a drill that does not end is cut at 45 s, so a communicator that ignores its time-out fails in under a minute)
    MPI_TIMEOUT=45 KILN_LOG=info KILN_COMM_TIMEOUT=2 KILN_DRILL=$$ mpi 2 -x KILN_LOG -x KILN_COMM_TIMEOUT -x KILN_DRILL "$bin" "${long[@]}" \
        -o out.png >out.txt 2>err.txt &
    job=$!
    for _ in $(seq 200); do grep -q "tensor parallelism" err.txt 2>/dev/null && break; sleep 0.1; done
    victim="" # rank 1 of this drill: the process whose environment has KILN_DRILL=$$ and rank 1, never one by name
    for e in $(grep -lzx "KILN_DRILL=$$" /proc/[0-9]*/environ 2>/dev/null); do
        grep -qzx "OMPI_COMM_WORLD_RANK=1" "$e" 2>/dev/null && { victim=${e#/proc/}; victim=${victim%/environ}; break; }
    done
    t0=$(date +%s)
    [ -n "$victim" ] && kill -"$sig" "$victim"
    wait "$job"; rc=$?
    el=$(( $(date +%s) - t0 ))
    [ -n "$victim" ] && [ "$sig" = STOP ] && kill -CONT "$victim" 2>/dev/null
    msg="all-reduce timed out"
    [ "$sig" = KILL ] && msg="signal 9"
    if [ -n "$victim" ] && [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && grep -q "$msg" err.txt && [ "$el" -lt 40 ]; then
        echo "ok SIG$sig to rank 1 during a TP generate: every rank ends ('$msg', exit $rc, ${el}s after the signal)"
    else echo "FAIL SIG$sig drill: victim '${victim}', exit $rc after ${el}s: $(tail -5 err.txt)"; fail=1; fi
done
exit $fail
