#!/usr/bin/env python3
"""png_psnr.py A.png B.png: the PSNR in dB between two 8-bit RGB/RGBA PNGs of one size ("inf" when equal).

Standard library only (CI's cli tests have no numpy/PIL): decodes the IDAT stream and undoes the five PNG row
filters. Exit 2 for files it cannot read or of different sizes."""
import math
import struct
import sys
import zlib


def decode(path):
    b = open(path, "rb").read()
    if b[:8] != b"\x89PNG\r\n\x1a\n":
        sys.exit(f"png_psnr: {path}: not a PNG")
    i, idat, w = 8, b"", None
    while i < len(b):
        n, t = struct.unpack(">I4s", b[i:i + 8])
        if t == b"IHDR":
            w, h, depth, ctype = struct.unpack(">IIBB", b[i + 8:i + 18])
            if depth != 8 or ctype not in (2, 6):
                sys.exit(f"png_psnr: {path}: only 8-bit RGB/RGBA (depth {depth}, colour type {ctype})")
            bpp = 3 if ctype == 2 else 4
        elif t == b"IDAT":
            idat += b[i + 8:i + 8 + n]
        i += 12 + n
    raw, stride, out, prev = zlib.decompress(idat), w * bpp, bytearray(), bytearray(w * bpp)
    for y in range(h):
        f, row = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for x in range(stride):
            a = row[x - bpp] if x >= bpp else 0
            c = prev[x - bpp] if x >= bpp else 0
            u = prev[x]
            if f == 1: row[x] = (row[x] + a) & 255
            elif f == 2: row[x] = (row[x] + u) & 255
            elif f == 3: row[x] = (row[x] + (a + u) // 2) & 255
            elif f == 4:
                p = a + u - c
                pa, pb, pc = abs(p - a), abs(p - u), abs(p - c)
                row[x] = (row[x] + (a if pa <= pb and pa <= pc else u if pb <= pc else c)) & 255
        out += row
        prev = row
    return (w, h, bpp), out


if len(sys.argv) != 3:
    sys.exit(__doc__)
(sa, a), (sb, b) = decode(sys.argv[1]), decode(sys.argv[2])
if sa != sb:
    print(f"png_psnr: sizes differ: {sa} vs {sb}", file=sys.stderr)
    sys.exit(2)
mse = sum((x - y) ** 2 for x, y in zip(a, b)) / len(a)
print("inf" if mse == 0 else f"{10 * math.log10(255 * 255 / mse):.2f}")
