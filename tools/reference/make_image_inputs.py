"""Input images for kiln's image decoders (tests/unit/test_io_image_load.c, tests/fuzz/corpus/fuzz_image_load):
small PNG (RGB, RGBA, grey, palette, 16-bit), JPEG and WebP (lossless, lossy) files written by PIL, and for each
the pixels PIL decodes with convert("RGB") - what the official pipelines feed their VAE - as an RGB PNG
(<name>.expect.png). Also the bad inputs the decoders must refuse: a truncated PNG, a 30000x30000 PNG header,
a truncated JPEG, a truncated WebP and a text file."""
import io
import os
import struct
import zlib

import numpy as np
from PIL import Image

OUT = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "data", "images")


def pattern(w, h, seed):
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    base = np.stack([(x * 255 // max(w - 1, 1)), (y * 255 // max(h - 1, 1)), ((x + y) * 7) % 256], -1)
    return np.clip(base + rng.integers(-20, 21, (h, w, 3)), 0, 255).astype(np.uint8)


def save(name, img, **kw):
    path = os.path.join(OUT, name)
    fmt = {"png": "PNG", "jpg": "JPEG", "webp": "WEBP"}[name.rsplit(".", 1)[1]]
    img.save(path, fmt, **kw)
    with Image.open(path) as back:
        back.convert("RGB").save(os.path.join(OUT, name.rsplit(".", 1)[0] + "." + name.rsplit(".", 1)[1] + ".expect.png"), "PNG")
    return path


def chunk(t, data):
    return struct.pack(">I", len(data)) + t + data + struct.pack(">I", zlib.crc32(t + data) & 0xFFFFFFFF)


def main():
    os.makedirs(OUT, exist_ok=True)
    rgb = pattern(23, 17, 1)
    save("rgb.png", Image.fromarray(rgb))
    rgba = np.concatenate([pattern(19, 21, 2), (np.arange(19 * 21).reshape(21, 19, 1) % 256).astype(np.uint8)], -1)
    save("rgba.png", Image.fromarray(rgba, "RGBA"))
    save("grey.png", Image.fromarray(pattern(16, 9, 3)[:, :, 0], "L"))
    save("palette.png", Image.fromarray(pattern(21, 13, 4)).quantize(37))
    save("photo.jpg", Image.fromarray(pattern(37, 29, 5)), quality=90)
    save("grey.jpg", Image.fromarray(pattern(17, 11, 6)[:, :, 1], "L"), quality=85)
    save("lossless.webp", Image.fromarray(pattern(31, 15, 7)), lossless=True)
    save("lossy.webp", Image.fromarray(pattern(33, 27, 8)), quality=80)
    # Bad inputs (no expect file): the decoders must refuse each with a clear error.
    raw = open(os.path.join(OUT, "rgb.png"), "rb").read()
    open(os.path.join(OUT, "bad-truncated.png"), "wb").write(raw[: len(raw) * 2 // 3])
    ihdr = struct.pack(">IIBBBBB", 30000, 30000, 8, 2, 0, 0, 0)
    idat = zlib.compress(b"\0" * 64)
    big = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")
    open(os.path.join(OUT, "bad-30000x30000.png"), "wb").write(big)
    raw = open(os.path.join(OUT, "photo.jpg"), "rb").read()
    open(os.path.join(OUT, "bad-truncated.jpg"), "wb").write(raw[: len(raw) // 2])
    raw = open(os.path.join(OUT, "lossy.webp"), "rb").read()
    open(os.path.join(OUT, "bad-truncated.webp"), "wb").write(raw[: len(raw) // 2])
    open(os.path.join(OUT, "bad-not-an-image.png"), "wb").write(b"this is a text file, not a picture\n")


if __name__ == "__main__":
    main()
