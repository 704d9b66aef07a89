"""Write the per-tensor table (shape, tolerance, measured spread) into tests/data/golden/README.md.

The table is generated from the golden files' own metadata, between two marker lines, so the numbers in the
README can never drift from the files kiln's tests read.
"""
import glob
import os

import common
from safetensors import safe_open

BEGIN = "<!-- BEGIN GENERATED: tools/reference/describe_goldens.py -->"
END = "<!-- END GENERATED -->"


def table():
    lines = []
    for path in sorted(glob.glob(os.path.join(common.GOLDEN, "*.safetensors"))):
        with safe_open(path, "pt") as f:
            meta = f.metadata()
            name = os.path.basename(path)
            lines += ["", "### %s (run dtype %s, %d bytes)" % (name, meta["run_dtype"], os.path.getsize(path)), "",
                      meta["description"], ""]
            lines += ["| tensor | shape | dtype | tol atol,rtol | max-abs spread | tolrms | rms spread |",
                      "| --- | --- | --- | --- | --- | --- | --- |"]
            inputs = set(__import__("json").loads(meta.get("inputs", "[]")))
            for k in sorted(f.keys()):
                t = f.get_slice(k)
                lines.append("| %s%s | %s | %s | %s | %s | %s | %s |" % (
                    k, " (input)" if k in inputs else "", list(t.get_shape()), t.get_dtype(),
                    meta.get("tol." + k, "-"), meta.get("spread." + k, "-"), meta.get("tolrms." + k, "-"),
                    meta.get("spreadrms." + k, "-")))
    return "\n".join(lines)


def main():
    path = os.path.join(common.GOLDEN, "README.md")
    text = open(path).read()
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    with open(path, "w") as f:
        f.write(head + BEGIN + "\n" + table() + "\n\n" + END + tail)


if __name__ == "__main__":
    main()
