#!/usr/bin/env python3
"""tests/gpu/report.py - the arithmetic behind tests/gpu/run.sh (standard library only).

  report.py png A.png B.png MIN_PSNR          compare two kiln PNGs: PSNR, max and mean abs difference; exit 1
                                              when PSNR < MIN_PSNR or sizes differ
  report.py perf LABEL W H BATCH STEPS PERF.json PEAK_TFLOPS PEAK_MEM_MIB
                                              one row of the timing table from a kiln perf dump: seconds per
                                              image by stage, DiT seconds per step, DiT TFLOP/s and its fraction
                                              of the measured bf16 peak (FLOPs counted from the klein-4B shapes)
  report.py flops W H BATCH                   the DiT FLOPs of one forward (for checking the count)
  report.py golden GOLDEN.safetensors PNG MIN_PSNR
                                              compare a kiln PNG with a golden's image_u8 (image 0): PSNR; exit 1
                                              below MIN_PSNR or on a size mismatch
  report.py bench REPORT.json                 one line per graph of a `kiln bench run` report: median seconds per
                                              image over the timed submits (the warm-up excluded: a second request
                                              in the same process), their count, and the NVML trace's peaks;
                                              exit 1 when a graph has no timed submit
  report.py memline LOG                       the last "cuda: memory peak:" line of a kiln log, as
                                              "arena A MiB, weights W MiB, outside O MiB, graphs C captured R
                                              replays"; exit 1 when there is none
"""
import json
import struct
import sys
import zlib

# ---- PNG (8-bit gray/RGB/RGBA, non-interlaced: what kiln writes) ----


def read_png(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"{path}: not a PNG")
    pos, idat, w = 8, b"", None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        pos += 12 + n
        if kind == b"IHDR":
            w, h, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", body)
            if depth != 8 or interlace:
                raise ValueError(f"{path}: only 8-bit non-interlaced PNGs are read here")
            ch = {0: 1, 2: 3, 4: 2, 6: 4}[color]
        elif kind == b"IDAT":
            idat += body
        elif kind == b"IEND":
            break
    raw = zlib.decompress(idat)
    stride = w * ch
    out = bytearray(h * stride)
    prev = bytearray(stride)
    for y in range(h):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - ch] if i >= ch else 0
            b = prev[i]
            c = prev[i - ch] if i >= ch else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pr = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[i] = (line[i] + pr) & 255
        out[y * stride:(y + 1) * stride] = line
        prev = line
    return w, h, ch, bytes(out)


def cmd_png(a, b, min_psnr):
    wa, ha, ca, pa = read_png(a)
    wb, hb, cb, pb = read_png(b)
    if (wa, ha, ca) != (wb, hb, cb):
        print(f"png: sizes differ: {wa}x{ha}x{ca} vs {wb}x{hb}x{cb}")
        return 1
    se = sum((x - y) ** 2 for x, y in zip(pa, pb))
    mx = max(abs(x - y) for x, y in zip(pa, pb))
    mean = sum(abs(x - y) for x, y in zip(pa, pb)) / len(pa)
    import math
    psnr = float("inf") if se == 0 else 10 * math.log10(255.0 ** 2 / (se / len(pa)))
    ok = psnr >= float(min_psnr)
    print(f"png: {wa}x{ha}: PSNR {psnr:.1f} dB (min {min_psnr}), max abs {mx}/255, mean abs {mean:.3f}/255 "
          f"-> {'ok' if ok else 'FAIL'}")
    return 0 if ok else 1


# ---- DiT FLOPs (spec section 1: D=3072, F=9216, 5 double + 20 single blocks, L_txt text tokens) ----

D, F, CTX, L_TXT = 3072, 9216, 7680, 512


def dit_flops(w, h, batch, l_txt=L_TXT):
    n = (w // 16) * (h // 16)
    t = n + l_txt
    per_row = 2 * D * (3 * D + D + 2 * F + F)      # qkv, proj, mlp in (2F), mlp out: same in both block kinds
    attn = 4 * t * t * D                          # q k^T and p v over all heads
    blocks = 5 * (t * per_row + attn) + 20 * (t * per_row + attn)
    io = 2 * n * 128 * D + 2 * l_txt * CTX * D + 2 * n * D * 128
    return batch * (blocks + io)


def cmd_perf(label, w, h, batch, steps, path, peak_tflops, peak_mem):
    w, h, batch, steps = int(w), int(h), int(batch), int(steps)
    try:
        dump = json.load(open(path))
    except Exception as e:  # noqa: BLE001 - any unreadable dump is reported, not raised
        print(f"{label:<22} perf dump unreadable: {e}")
        return 1
    stages = {}
    for s in dump.get("stages", []):
        stages[s.get("name", "?")] = stages.get(s.get("name", "?"), 0.0) + float(s.get("duration_ms", 0.0))
    total = float(dump.get("total_duration_ms", sum(stages.values()))) / 1000.0
    per_img = total / batch
    den = stages.get("Denoising", 0.0) / 1000.0
    dit_step = den / steps if steps else 0.0
    tflops = dit_flops(w, h, batch) / dit_step / 1e12 if dit_step > 0 else 0.0
    frac = tflops / float(peak_tflops) if float(peak_tflops) > 0 else 0.0
    parts = "  ".join(f"{k}={v / 1000.0 / batch:.3f}" for k, v in stages.items() if v > 0)
    print(f"{label:<22} {per_img:8.3f} s/img  DiT {dit_step * 1000:8.1f} ms/step  {tflops:6.1f} TFLOP/s  "
          f"{100 * frac:5.1f}% of peak  peak mem {peak_mem} MiB")
    print(f"{'':<22} by stage (s/img): {parts}")
    return 0


def read_safetensors(path):
    data = open(path, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    head = json.loads(data[8:8 + n])
    return head, data[8 + n:]


def cmd_golden(golden, png, min_psnr):
    head, body = read_safetensors(golden)
    t = head.get("image_u8")
    if not t or t["dtype"] != "U8" or len(t["shape"]) != 4:
        print(f"golden: {golden} has no u8 image [B,H,W,C]")
        return 1
    _, gh, gw, gc = t["shape"]
    b0, _ = t["data_offsets"]
    ref = body[b0:b0 + gh * gw * gc]
    w, h, ch, px = read_png(png)
    if (w, h) != (gw, gh) or ch < gc:
        print(f"golden: size {w}x{h}x{ch}, golden {gw}x{gh}x{gc}")
        return 1
    got = px if ch == gc else bytes(px[i] for i in range(len(px)) if i % ch < gc)
    se = sum((x - y) ** 2 for x, y in zip(got, ref))
    mx = max(abs(x - y) for x, y in zip(got, ref))
    import math
    psnr = float("inf") if se == 0 else 10 * math.log10(255.0 ** 2 / (se / len(ref)))
    ok = psnr >= float(min_psnr)
    print(f"golden {head.get('__metadata__', {}).get('golden', '?')}: PSNR {psnr:.1f} dB (min {min_psnr}), "
          f"max abs {mx}/255 -> {'ok' if ok else 'FAIL'}")
    return 0 if ok else 1


def _red(block, key, stat):
    v = (block or {}).get(key) or {}
    return v.get(stat) if isinstance(v, dict) else None


def cmd_bench(path):
    rep = json.load(open(path))
    bad = 0
    for name, g in sorted((rep.get("graphs") or {}).items()):
        knobs = g.get("knobs", {})
        for ci, card in sorted((g.get("cards") or {}).items()):
            if not isinstance(card, dict):
                continue
            for b, bat in sorted((card.get("batches") or {}).items()):
                red = bat.get("reduced") or {}
                spi = red.get("exec_seconds_per_image") or {}
                n = len(bat.get("timed") or [])
                tr = bat.get("trace") or {}
                mem, pw = _red(tr, "memory.used", "max"), _red(tr, "power.draw", "median")
                print(f"{name}: {knobs.get('width')}x{knobs.get('height')} b{b} {knobs.get('steps')} steps: "
                      f"{spi.get('median')} s/image median of {n} timed (warm-up excluded), "
                      f"cold first {bat.get('cold_first_submit_exec_seconds')} s; NVML memory.used max {mem} MiB, "
                      f"power median {pw} W")
                if not n or spi.get("median") is None:
                    bad = 1
    if not rep.get("graphs"):
        print("bench: the report has no graphs")
        bad = 1
    return bad


def cmd_memline(path):
    import re
    last = None
    for line in open(path, errors="replace"):
        if "cuda: memory peak:" in line:
            last = line
    if not last:
        print("no 'cuda: memory peak:' line (the CUDA backend did not close, or KILN_LOG is below info)")
        return 1
    def num(pat):
        m = re.search(pat, last)
        return m.group(1) if m else "?"
    arena, weights, outside = num(r"arena (\d+) MiB"), num(r"weights (\d+) MiB"), num(r"outside the arena (\d+) MiB")
    cap, rep = num(r"(\d+) graphs captured"), num(r"(\d+) replays")
    fused = num(r"(\d+) GEMM calls with a fused epilogue")
    print(f"arena {arena} MiB, weights {weights} MiB, outside {outside} MiB, graphs {cap} captured {rep} replays, "
          f"{fused} fused-epilogue GEMM calls")
    return 0


def main(argv):
    if len(argv) >= 5 and argv[1] == "png":
        return cmd_png(argv[2], argv[3], argv[4])
    if len(argv) >= 10 and argv[1] == "perf":
        return cmd_perf(*argv[2:10])
    if len(argv) >= 5 and argv[1] == "golden":
        return cmd_golden(argv[2], argv[3], argv[4])
    if len(argv) >= 3 and argv[1] == "bench":
        return cmd_bench(argv[2])
    if len(argv) >= 3 and argv[1] == "memline":
        return cmd_memline(argv[2])
    if len(argv) >= 5 and argv[1] == "flops":
        print(f"{dit_flops(int(argv[2]), int(argv[3]), int(argv[4])) / 1e12:.2f} TFLOP per DiT forward")
        return 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
