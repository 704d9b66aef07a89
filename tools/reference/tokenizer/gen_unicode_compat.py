#!/usr/bin/env python3
"""Generates src/text/unicode_compat.c and tests/data/tokenizer/onig_classes.json: the Unicode facts where HF
`tokenizers` and the C libraries kiln uses (PCRE2, utf8proc) disagree, measured, not guessed.

    /opt/kiln-ref/bin/python tools/reference/tokenizer/gen_unicode_compat.py

Why: HF's regex engine is Oniguruma with newer Unicode tables (16.0 in tokenizers 0.23) than Debian's PCRE2
10.42 (14.0), and PCRE2's UCP \\s also matches U+180E, which Oniguruma's does not. HF's NFC comes from the
crate unicode-normalization-alignments, whose tables are Unicode 9: combining marks assigned later are plain
starters there (canonical combining class 0, no composition), while utf8proc (Unicode 15) reorders them.

What it measures, for every Unicode scalar value:
  * Oniguruma's \\s, \\p{L}, \\p{N}: through tokenizers.pre_tokenizers.Split(tokenizers.Regex(...)).
  * PCRE2's \\p{L}, \\p{N} (UTF+UCP): through the system libpcre2-8 with ctypes.
  * NFC: code points with a nonzero combining class in utf8proc that HF's NFC treats as class 0, and the
    components of compositions utf8proc makes and HF does not. Both act as hard boundaries in HF's NFC.
Writes the differences as range tables (C) and Oniguruma's full sets (JSON, for the unit test that checks the
translated regex classes against them on the build machine's PCRE2).
"""
import ctypes
import json
import os
import sys
import unicodedata

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
CPS = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]


def onig_set(pat):
    from tokenizers import Regex, pre_tokenizers as pt
    split = pt.Split(Regex(pat), behavior="removed")
    out = set()
    for i in range(0, len(CPS), 4096):
        chunk = CPS[i:i + 4096]
        kept = set("".join(p for p, _ in split.pre_tokenize_str("".join(map(chr, chunk)))))
        out.update(c for c in chunk if chr(c) not in kept)
    return out


def pcre2_set(pat):
    lib = ctypes.CDLL("libpcre2-8.so.0")
    lib.pcre2_compile_8.restype = ctypes.c_void_p
    lib.pcre2_compile_8.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint32, ctypes.POINTER(ctypes.c_int),
                                    ctypes.POINTER(ctypes.c_size_t), ctypes.c_void_p]
    lib.pcre2_match_data_create_8.restype = ctypes.c_void_p
    lib.pcre2_match_data_create_8.argtypes = [ctypes.c_uint32, ctypes.c_void_p]
    lib.pcre2_match_8.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_size_t,
                                  ctypes.c_uint32, ctypes.c_void_p, ctypes.c_void_p]
    PCRE2_UTF, PCRE2_UCP = 0x00080000, 0x00020000
    ec, eo = ctypes.c_int(), ctypes.c_size_t()
    re = lib.pcre2_compile_8(("^" + pat + "$").encode(), ctypes.c_size_t(-1), PCRE2_UTF | PCRE2_UCP,
                             ctypes.byref(ec), ctypes.byref(eo), None)
    md = lib.pcre2_match_data_create_8(4, None)
    out = set()
    for c in CPS:
        b = chr(c).encode()
        if lib.pcre2_match_8(re, b, len(b), 0, 0, md, None) > 0:
            out.add(c)
    return out


def nfc_boundaries():
    from tokenizers import normalizers
    hf = normalizers.NFC()
    u = ctypes.CDLL("libutf8proc.so.2")
    u.utf8proc_get_property.restype = ctypes.POINTER(ctypes.c_int16 * 3)
    u.utf8proc_get_property.argtypes = [ctypes.c_int32]
    u.utf8proc_decompose_char.argtypes = [ctypes.c_int32, ctypes.POINTER(ctypes.c_int32), ctypes.c_ssize_t,
                                          ctypes.c_int, ctypes.POINTER(ctypes.c_int)]
    u.utf8proc_decompose_char.restype = ctypes.c_ssize_t
    u.utf8proc_NFC.restype = ctypes.c_void_p
    u.utf8proc_NFC.argtypes = [ctypes.c_char_p]
    libc = ctypes.CDLL(None)
    libc.free.argtypes = [ctypes.c_void_p]

    def ccc(c):
        return u.utf8proc_get_property(c).contents[1]

    def u_nfc(s):
        p = u.utf8proc_NFC(s.encode())
        r = ctypes.string_at(p).decode()
        libc.free(p)
        return r

    out = set()
    for c in CPS:  # marks HF's tables do not know: "a" + c + mark composes in HF only if c is a known mark
        if ccc(c) and not (hf.normalize_str("a" + chr(c) + "\u0328").startswith("\u0105") or
                           hf.normalize_str("a" + chr(c) + "\u0301").startswith("\u00e1")):
            out.add(c)
    buf, last = (ctypes.c_int32 * 32)(), ctypes.c_int()
    UTF8PROC_STABLE, UTF8PROC_DECOMPOSE = 1 << 1, 1 << 4
    for c in CPS:  # compositions utf8proc makes and HF does not: the later components become boundaries
        n = u.utf8proc_decompose_char(c, buf, 32, UTF8PROC_STABLE | UTF8PROC_DECOMPOSE, ctypes.byref(last))
        if n > 1 or (n == 1 and buf[0] != c):
            d = "".join(chr(buf[i]) for i in range(n))
            if hf.normalize_str(d) != u_nfc(d):
                for x in d[1:]:
                    if ccc(ord(x)) == 0:
                        out.add(ord(x))
    return out


def ranges(s):
    r = []
    for c in sorted(s):
        if r and r[-1][1] == c - 1:
            r[-1][1] = c
        else:
            r.append([c, c])
    return r


def c_table(name, rs, comment):
    lines = [f"/* {comment} */", f"const kiln_cp_range {name}[] = {{"]
    row = "   "
    for a, b in rs:
        item = f" {{0x{a:04X}, 0x{b:04X}}},"
        if len(row) + len(item) > 116:
            lines.append(row)
            row = "   "
        row += item
    if row.strip():
        lines.append(row)
    lines.append("};")
    lines.append(f"const size_t {name}_count = sizeof {name} / sizeof {name}[0];")
    return "\n".join(lines) + "\n"


def main():
    import tokenizers
    o = {k: onig_set(p) for k, p in (("s", r"\s"), ("L", r"\p{L}"), ("N", r"\p{N}"))}
    p = {k: pcre2_set(pt) for k, pt in (("L", r"\p{L}"), ("N", r"\p{N}"))}
    for k in "LN":
        if p[k] - o[k]:
            print(f"PCRE2 puts {len(p[k] - o[k])} code points in \\p{{{k}}} that Oniguruma does not: a union "
                  "cannot express that; kiln would differ from HF on them", file=sys.stderr)
            return 1
    nfc = nfc_boundaries()
    tables = [
        c_table("kiln_onig_white_space", ranges(o["s"]),
                "Oniguruma's \\s (= the White_Space property; PCRE2's UCP \\s adds U+180E)"),
        c_table("kiln_onig_letter_extra", ranges(o["L"] - p["L"]), "in Oniguruma's \\p{L}, not PCRE2's (newer Unicode)"),
        c_table("kiln_onig_number_extra", ranges(o["N"] - p["N"]), "in Oniguruma's \\p{N}, not PCRE2's (newer Unicode)"),
        c_table("kiln_hf_nfc_boundary", ranges(nfc),
                "starters in HF's NFC (Unicode 9 tables) that utf8proc reorders or composes"),
    ]
    src = (f"/* unicode_compat.c - GENERATED by tools/reference/tokenizer/gen_unicode_compat.py; do not edit.\n"
           f" *\n"
           f" * Where HF tokenizers {tokenizers.__version__} and the C libraries (PCRE2, utf8proc) disagree on Unicode\n"
           f" * facts, measured over every code point (see the generator's docstring).\n"
           f" */\n#include \"text/unicode_compat.h\"\n\n" + "\n".join(tables))
    with open(os.path.join(ROOT, "src", "text", "unicode_compat.c"), "w") as f:
        f.write(src)
    data = {"tokenizers": tokenizers.__version__, "note": "Oniguruma classes as HF tokenizers matches them",
            "s": ranges(o["s"]), "L": ranges(o["L"]), "N": ranges(o["N"])}
    with open(os.path.join(ROOT, "tests", "data", "tokenizer", "onig_classes.json"), "w") as f:
        json.dump(data, f, separators=(",", ":"))
        f.write("\n")
    print(f"L +{len(o['L'] - p['L'])}, N +{len(o['N'] - p['N'])}, s {len(o['s'])}, NFC boundaries {len(nfc)}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
