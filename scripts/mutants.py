#!/usr/bin/env python3
"""mutants.py - mutation testing over the planted bugs in tests/mutants/*.txt (run it as scripts/mutants.sh).

Each block of a tests/mutants/<area>.txt file plants one bug: `find` (text occurring exactly once in `file`) is
replaced by `replace`, and the ctest tests matching `tests` must then fail. This script checks that they do:

  * it validates every block (unknown, missing or repeated keys, duplicate ids, a missing file, a `find` that does
    not occur exactly once) and names the block of every error;
  * it copies the tracked and untracked-but-not-ignored files of the working tree into a scratch tree
    (BUILD/tree, only files whose content changed are rewritten, so the build there stays incremental) and builds
    it once, unmutated, in BUILD/build (release);
  * then, one mutant at a time, it edits the scratch copy (never the working tree), rebuilds only the targets the
    named tests run, runs those tests one by one, fastest first (by the times ctest recorded in this or the
    project's build dirs), until one fails, and restores the file (also on error, Ctrl-C or SIGTERM);
  * last, on the restored tree, it runs each test that killed a mutant once more: a kill counts only if that test
    passes without the bug (a test that already fails can kill nothing). Checking the killers afterwards, not
    every named test beforehand, runs each needed test once and no test that no mutant needed.

Verdicts: KILLED (a named test failed, crashed or timed out), SURVIVED (all named tests passed: the tests are
weak), BUILD-FAILED (the mutant does not compile: a broken mutant proves nothing), ERROR (the baseline of its
tests fails, no test matches `tests`, or ctest could not run one), NOT-RUN (the code cannot run here, e.g. an AMX
kernel on a CPU without AMX or a CUDA file in the CPU build; never counted as killed). Exit status 0 only when
every mutant that ran was KILLED.

The optional key `needs: amx|avx512|avx2|cuda|cudnn` (comma separated) marks code that runs only on that hardware;
it is also inferred from the file name (*_amx.*, *_avx512.*, *_avx2.*, src/compute/cuda/, *.cu). A `cuda` mutant
is built and tested in BUILD/build-emu, the CUDA emulator's build (cmake -DKILN_CUDA_EMU=ON, tests/cuda_emu: the
backend's own sources on the CPU), which needs only the CUDA headers; without them it is NOT-RUN. A `cudnn` mutant
(the cuDNN attention, which the emulator does not build) is built with nvcc in BUILD/build-cudnn (-DKILN_CUDA=ON,
sm_90) and tested by its host-side tests; without nvcc or the cuDNN frontend headers it is NOT-RUN.
"""
import argparse
import datetime
import hashlib
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REQUIRED = ("id", "file", "find", "replace", "tests", "why")
OPTIONAL = ("needs",)
NEEDS = ("amx", "avx512", "avx2", "cuda", "cudnn")
# /proc/cpuinfo flags each tier's kernels need (what src/compute/cpu/cpu_features.c checks through cpuid)
CPU_FLAGS = {
    "avx2": ("avx2", "fma", "f16c"),
    "avx512": ("avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512_bf16", "fma"),
    "amx": ("amx_tile", "amx_bf16"),
}
ID_RE = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")


class Mutant:
    def __init__(self, where):
        self.where = where  # "tests/mutants/x.txt:12"
        self.fields = {}

    def __getattr__(self, key):
        try:
            return self.__dict__["fields"][key]
        except KeyError:
            raise AttributeError(key) from None

    def needs(self):
        out = [n.strip() for n in self.fields.get("needs", "").split(",") if n.strip()]
        f = self.fields["file"]
        base = os.path.basename(f)
        if f.startswith("src/compute/cuda/") or f.endswith(".cu"):
            out.append("cuda")
        for tier in ("amx", "avx512", "avx2"):
            if re.search(r"_%s[._]" % tier, base):
                out.append(tier)
        return sorted(set(out))


def parse_file(path, errors):
    """Blocks of `key: value` lines separated by blank lines; lines starting with # are comments."""
    rel = os.path.relpath(path, ROOT)
    mutants, cur = [], None
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    for n, line in enumerate(lines, 1):
        if line.strip() == "":
            cur = None
            continue
        if line.startswith("#"):
            continue
        if cur is None:
            cur = Mutant("%s:%d" % (rel, n))
            mutants.append(cur)
        m = re.match(r"^([a-z_]+):(?: (.*))?$", line)
        if not m:
            errors.append("%s: line %d is not `key: value`: %r" % (cur.where, n, line))
            continue
        key, value = m.group(1), m.group(2) or ""
        if key not in REQUIRED and key not in OPTIONAL:
            errors.append("%s: unknown key %r (line %d)" % (cur.where, key, n))
        elif key in cur.fields:
            errors.append("%s: key %r given twice (line %d)" % (cur.where, key, n))
        else:
            cur.fields[key] = value
    return mutants


def load(errors, ctest_names=None):
    files = sorted(os.path.join(ROOT, "tests", "mutants", f) for f in os.listdir(os.path.join(ROOT, "tests", "mutants"))
                   if f.endswith(".txt"))
    mutants, seen = [], {}
    for path in files:
        for m in parse_file(path, errors):
            name = "%s (id %s)" % (m.where, m.fields.get("id", "?"))
            missing = [k for k in REQUIRED if k not in m.fields or (k != "replace" and m.fields[k].strip() == "")]
            if missing:
                errors.append("%s: missing %s" % (name, ", ".join(missing)))
                continue
            if not ID_RE.match(m.id):
                errors.append("%s: id is not kebab-case" % name)
            if m.id in seen:
                errors.append("%s: id also used at %s" % (name, seen[m.id]))
            seen[m.id] = m.where
            for n in m.needs():
                if n not in NEEDS:
                    errors.append("%s: needs %r is not one of %s" % (name, n, ", ".join(NEEDS)))
            if m.find == m.replace:
                errors.append("%s: replace is the same as find" % name)
            try:
                rx = re.compile(m.tests)
            except re.error as e:
                errors.append("%s: tests is not a regex: %s" % (name, e))
                rx = None
            # the emulator's tests (emu_*) are registered only in its build: a CPU build dir cannot vouch for them
            emu_only = "cuda" in m.needs() and m.tests.lstrip("^(").startswith("emu_")
            if rx and ctest_names is not None and not emu_only and not any(rx.search(t) for t in ctest_names):
                errors.append("%s: tests %r matches no ctest test" % (name, m.tests))
            fpath = os.path.join(ROOT, m.file)
            if os.path.isabs(m.file) or ".." in m.file.split("/") or not os.path.isfile(fpath):
                errors.append("%s: file %s does not exist in the tree" % (name, m.file))
                continue
            with open(fpath, encoding="utf-8") as f:
                count = f.read().count(m.find)
            if count != 1:
                errors.append("%s: find occurs %d times in %s (must be exactly once): %r" % (name, count, m.file, m.find))
            mutants.append(m)
    return mutants


def cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def cuda_headers():
    """The CUDA toolkit's include dir (the emulator build compiles against its headers), or None."""
    for d in (os.environ.get("CUDA_PATH", ""), "/usr/local/cuda", "/usr"):
        if d and os.path.isfile(os.path.join(d, "include", "cuda_runtime.h")) and \
                os.path.isfile(os.path.join(d, "include", "cublasLt.h")):
            return os.path.join(d, "include")
    return None


def nvcc():
    return shutil.which("nvcc") or next((p for p in ("/usr/local/cuda/bin/nvcc",) if os.access(p, os.X_OK)), None)


def cudnn_frontend():
    for d in (os.environ.get("KILN_CUDNN_FRONTEND", ""), "/opt/kiln-cudnn-frontend/include"):
        if d and os.path.isfile(os.path.join(d, "cudnn_frontend.h")):
            return d
    return None


def not_run_reason(m, flags):
    for n in m.needs():
        if n == "cudnn" and not (nvcc() and cudnn_frontend()):
            return "needs nvcc and the cuDNN frontend headers (scripts/fetch-cudnn-frontend.sh); not found"
        if n == "cuda" and not cuda_headers():
            return "needs the CUDA headers (the emulator build, tests/cuda_emu); none found"
        lacking = [f for f in CPU_FLAGS.get(n, ()) if f not in flags]
        if lacking:
            return "needs %s; this CPU lacks %s" % (n.upper(), " ".join(lacking))
    return None


# ---- the scratch tree and its build ------------------------------------------------------------------------
def tree_files():
    out = subprocess.run(["git", "-C", ROOT, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                         check=True, stdout=subprocess.PIPE).stdout.decode()
    return sorted(p for p in set(out.split("\0")) if p and (os.path.islink(os.path.join(ROOT, p)) or
                                                            os.path.isfile(os.path.join(ROOT, p))))


def same_content(a, b):
    try:
        if os.path.getsize(a) != os.path.getsize(b):
            return False
        with open(a, "rb") as fa, open(b, "rb") as fb:
            return fa.read() == fb.read()
    except OSError:
        return False


def sync_tree(tree):
    """Make `tree` a copy of the working tree; files whose content is unchanged keep their mtime (no rebuild)."""
    files = tree_files()
    keep, copied = set(files), 0
    for rel in files:
        src, dst = os.path.join(ROOT, rel), os.path.join(tree, rel)
        if os.path.islink(src):  # git keeps symlinks (tests/data/tiny/diffusers-base/*) as links: so does the copy
            target = os.readlink(src)
            if not (os.path.islink(dst) and os.readlink(dst) == target):
                os.makedirs(os.path.dirname(dst), exist_ok=True)
                if os.path.lexists(dst):
                    shutil.rmtree(dst) if os.path.isdir(dst) and not os.path.islink(dst) else os.unlink(dst)
                os.symlink(target, dst)
                copied += 1
            continue
        if os.path.islink(dst):
            os.unlink(dst)
        if not same_content(src, dst):
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            shutil.copyfile(src, dst)
            shutil.copymode(src, dst)
            copied += 1
    removed = 0
    for d, dirs, names in os.walk(tree):
        names = names + [x for x in dirs if os.path.islink(os.path.join(d, x))]  # links to folders
        for name in names:
            rel = os.path.relpath(os.path.join(d, name), tree)
            if rel not in keep:
                os.unlink(os.path.join(d, name))
                removed += 1
    return copied, removed


def run(cmd, log, **kw):
    """Runs cmd in its own process group with output to log; on any exit of ours (Ctrl-C, SIGTERM) the whole group
    (ctest and the servers its tests start) is killed, so nothing outlives the run."""
    with open(log, "w") as f:
        f.write("$ %s\n" % " ".join(cmd))
        f.flush()
        p = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, start_new_session=True, **kw)
        try:
            return p.wait()
        except BaseException:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()
            raise


def configure(tree, build, log):
    if os.path.isfile(os.path.join(build, "CMakeCache.txt")):
        return 0
    gen = ["-G", "Ninja"] if shutil.which("ninja") else []
    emu = ["-DKILN_CUDA_EMU=ON"] if build.endswith("build-emu") else []
    if build.endswith("build-cudnn"):
        emu = ["-DKILN_CUDA=ON", "-DCMAKE_CUDA_ARCHITECTURES=90", "-DCMAKE_CUDA_COMPILER=" + nvcc()]
    return run(["cmake", "-S", tree, "-B", build, "-DCMAKE_BUILD_TYPE=Release", "-DKILN_TESTS=ON"] + emu + gen, log)


def ctest_tests(build, regex=None):
    """{name: (command, environment)} of the registered tests (matching regex)."""
    cmd = ["ctest", "--test-dir", build, "-N", "--show-only=json-v1"]
    if regex is not None:
        cmd += ["-R", regex]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if r.returncode or not r.stdout.strip():
        raise SystemExit("mutants: error: `%s` failed: %s" % (" ".join(cmd), r.stderr.decode(errors="replace").strip()))
    out = r.stdout
    tests = {}
    for t in json.loads(out).get("tests", []):
        env = []
        for p in t.get("properties", []):
            if p.get("name") == "ENVIRONMENT":
                env = p.get("value", [])
        tests[t["name"]] = (t.get("command", []), env)
    return tests


def names_regex(names):
    """A ctest -R regex matching exactly these test names (word characters only)."""
    return "^(%s)$" % "|".join(sorted(names))


def targets_for(build, tests):
    """The build targets the tests run: the executables and libraries of the build dir that their add_test
    commands and environments name in CTestTestfile.cmake (ctest's own listing drops a command whose executable is
    not built yet), and always the kiln binary (unit and CLI tests find it through KILN_BIN)."""
    targets = {"kiln"}
    with open(os.path.join(build, "CTestTestfile.cmake")) as f:
        lines = f.read().split("\n")
    path_re = re.compile(re.escape(build) + r"/([A-Za-z0-9_.+-]+)")
    for name in tests:
        tag = "([=[%s]=]" % name
        for line in lines:
            if tag in line:
                for base in path_re.findall(line.split("_BACKTRACE_TRIPLES")[0]):
                    targets.add(re.sub(r"^lib(.*)\.(so|a)$", r"\1", base))
    return sorted(targets)


def build_targets(build, targets, log, jobs):
    return run(["cmake", "--build", build, "-j%d" % jobs, "--target"] + targets, log)


RESULT_RE = re.compile(r"^\s*\d+/\d+ Test\s+#\d+: (\S+) \.*\s*(\S.*?)\s+([\d.]+) sec\s*$")


def run_ctest(build, regex, log, timeout):
    """Runs ctest -R regex; returns {test: (status, seconds)} with status Passed / Failed / Timeout / Skipped /
    NotRun (ctest's "***Not Run": the executable is missing)."""
    cmd = ["ctest", "--test-dir", build, "-R", regex, "--no-tests=error", "--timeout", str(timeout),
           "--output-on-failure"]
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:abort_on_error=1", UBSAN_OPTIONS="print_stacktrace=1")
    run(cmd, log, env=env)
    results = {}
    with open(log, errors="replace") as f:
        for line in f:
            m = RESULT_RE.match(line)
            if not m:
                continue
            name, status, secs = m.group(1), m.group(2), float(m.group(3))
            if status.startswith("Passed"):
                s = "Passed"
            elif "Not Run" in status:
                s = "NotRun"
            elif "Skipped" in status:
                s = "Skipped"
            elif "Timeout" in status:
                s = "Timeout"
            else:
                s = "Failed"
            results[name] = (s, secs)
    return results


def known_costs(build):
    """{test: seconds} from the times ctest recorded (Testing/Temporary/CTestCostData.txt) in the scratch build and
    in the project's own build dirs (the largest: a sanitized run's time bounds the release one). Used to run the
    quickest test first and to size time-outs; a test never timed counts as 0 s."""
    costs = {}
    for d in (build, os.path.join(ROOT, "build"), os.path.join(ROOT, "build-asan")):
        try:
            with open(os.path.join(d, "Testing", "Temporary", "CTestCostData.txt"), errors="replace") as f:
                for line in f:
                    if line.startswith("---"):
                        break
                    parts = line.split()
                    if len(parts) == 3:
                        try:
                            costs[parts[0]] = max(costs.get(parts[0], 0.0), float(parts[2]))
                        except ValueError:
                            pass
        except OSError:
            pass
    return costs


def apply_mutant(tree, m):
    path = os.path.join(tree, m.file)
    with open(path, encoding="utf-8") as f:
        original = f.read()
    if original.count(m.find) != 1:
        raise RuntimeError("find no longer occurs exactly once in the scratch copy of %s" % m.file)
    with open(path, "w", encoding="utf-8") as f:
        f.write(original.replace(m.find, m.replace))
    return path, original


def restore(path, original):
    # a plain write (new mtime), so the next build recompiles the restored file
    with open(path, "w", encoding="utf-8") as f:
        f.write(original)


# ---- output ------------------------------------------------------------------------------------------------
def md_cell(s):
    return s.replace("|", "\\|").replace("\n", " ")


def markdown_rows(mutants):
    rows = ["| id | file | tests that kill it | needs | the bug |", "|---|---|---|---|---|"]
    for m in mutants:
        rows.append("| `%s` | `%s` | `%s` | %s | %s |" % (m.id, m.file, md_cell(m.tests), ", ".join(m.needs()),
                                                       md_cell(m.why)))
    return rows


def print_list(mutants, markdown, flags):
    if markdown:
        print("\n".join(markdown_rows(mutants)))
        return
    for m in mutants:
        nr = not_run_reason(m, flags)
        print("%-44s %-44s %-34s %s" % (m.id, m.file, m.tests, ("NOT-RUN here: " + nr) if nr else ""))


DOC_BEGIN = "<!-- mutants table: generated by scripts/mutants.sh --write-doc docs/testing.md; do not edit -->"
DOC_END = "<!-- end of mutants table -->"


def doc_with_table(path, mutants):
    """The text of `path` with the block between DOC_BEGIN and DOC_END replaced by the current table."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if text.count(DOC_BEGIN) != 1 or text.count(DOC_END) != 1:
        raise SystemExit("mutants: error: %s lacks the table markers %r ... %r" % (path, DOC_BEGIN, DOC_END))
    head, rest = text.split(DOC_BEGIN)
    _, tail = rest.split(DOC_END)
    rows = markdown_rows(mutants)
    return "%s%s\n%s\n%s%s" % (head, DOC_BEGIN, "\n".join(rows), DOC_END, tail), text


def day_seed():
    return (datetime.datetime.now(datetime.timezone.utc).date() - datetime.date(1970, 1, 1)).days


def main():
    ap = argparse.ArgumentParser(prog="scripts/mutants.sh", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--list", action="store_true", help="validate the lists and print them (builds nothing)")
    ap.add_argument("--markdown", action="store_true", help="with --list: a markdown table (docs/testing.md)")
    ap.add_argument("--ctest-dir", metavar="DIR", help="with --list: also check every `tests` regex matches a "
                    "test registered in this build dir")
    ap.add_argument("--write-doc", metavar="FILE", help="with --list: rewrite the mutants table in FILE "
                    "(docs/testing.md)")
    ap.add_argument("--check-doc", metavar="FILE", help="with --list: fail if FILE's mutants table is not current")
    ap.add_argument("--sample", type=int, metavar="N", help="run N mutants picked by --seed among those runnable here")
    ap.add_argument("--seed", metavar="S", help="sample seed (default: the UTC day number, so the sample rotates "
                    "daily)")
    ap.add_argument("--budget", type=float, metavar="SECONDS", help="start no mutant after this many seconds "
                    "(the rest are NOT-RUN, named); a safety net for CI, not a way to pick them")
    ap.add_argument("--only", action="append", metavar="ID", help="run only these ids (repeat or comma-separate)")
    ap.add_argument("--build", metavar="DIR", default=os.path.join(ROOT, "build-mutants"),
                    help="scratch dir: DIR/tree (copy of the tree) and DIR/build (default build-mutants/)")
    ap.add_argument("--jobs", type=int, default=min(os.cpu_count() or 1, 4), help="build parallelism")
    ap.add_argument("--timeout", type=int, default=120, help="seconds a named test may run under a mutant "
                    "(at least 5x its baseline time; a hang counts as a kill)")
    a = ap.parse_args()
    # SIGTERM unwinds like Ctrl-C, so the `finally` that restores the scratch copy's file runs
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    errors = []
    names = None
    if a.ctest_dir:
        names = list(ctest_tests(os.path.abspath(a.ctest_dir)).keys())
    mutants = load(errors, names)
    if errors:
        for e in errors:
            print("mutants: error: " + e, file=sys.stderr)
        print("mutants: %d error(s) in tests/mutants/*.txt" % len(errors), file=sys.stderr)
        return 2
    flags = cpu_flags()
    if a.list:
        for path in (a.write_doc, a.check_doc):
            if not path:
                continue
            new, cur = doc_with_table(path, mutants)
            if path == a.write_doc and new != cur:
                with open(path + ".tmp", "w", encoding="utf-8") as f:
                    f.write(new)
                os.replace(path + ".tmp", path)
                print("mutants: wrote the table of %d mutants into %s" % (len(mutants), path))
            elif path == a.check_doc and new != cur:
                print("mutants: error: the mutants table in %s is out of date; run scripts/mutants.sh --list "
                      "--write-doc %s" % (path, path), file=sys.stderr)
                return 2
        print_list(mutants, a.markdown, flags)
        if not a.markdown:
            print("mutants: %d mutants in %d files, all valid" % (
                len(mutants), len({m.where.split(":")[0] for m in mutants})))
        return 0

    if a.only:
        want = {w for o in a.only for w in o.split(",") if w}
        unknown = want - {m.id for m in mutants}
        if unknown:
            print("mutants: error: no mutant with id %s" % ", ".join(sorted(unknown)), file=sys.stderr)
            return 2
        mutants = [m for m in mutants if m.id in want]
    verdicts = {}  # id -> (verdict, detail, seconds)
    for m in mutants:
        nr = not_run_reason(m, flags)
        if nr:
            verdicts[m.id] = ("NOT-RUN", nr, 0.0)
    runnable = [m for m in mutants if m.id not in verdicts]
    if a.sample is not None:
        seed = a.seed if a.seed is not None else str(day_seed())
        rng = random.Random(int(hashlib.sha256(seed.encode()).hexdigest(), 16))
        pick = set(m.id for m in rng.sample(runnable, min(a.sample, len(runnable))))
        print("mutants: sample of %d of the %d runnable mutants (seed %s)" % (len(pick), len(runnable), seed))
        runnable = [m for m in runnable if m.id in pick]
        mutants = [m for m in mutants if m.id in pick or m.id in verdicts]

    start = time.time()
    scratch = os.path.abspath(a.build)
    tree, logs = (os.path.join(scratch, d) for d in ("tree", "logs"))
    os.makedirs(tree, exist_ok=True)
    os.makedirs(logs, exist_ok=True)
    copied, removed = sync_tree(tree)
    print("mutants: scratch tree %s (%d files copied, %d removed)" % (tree, copied, removed))

    def build_of(m):  # the CPU release build, the CUDA emulator's for a cuda mutant, nvcc's for a cudnn one
        n = m.needs()
        return os.path.join(scratch, "build-cudnn" if "cudnn" in n else "build-emu" if "cuda" in n else "build")

    # the unmutated tree builds (the named tests' targets); their runs on it come after the mutants, for the killers
    base_secs = {}
    for build in sorted({build_of(m) for m in runnable}):
        name = os.path.basename(build)
        if configure(tree, build, os.path.join(logs, "configure-%s.log" % name)):
            print("mutants: error: cmake configure failed, see %s" % os.path.join(logs, "configure-%s.log" % name))
            return 2
        base_secs.update(known_costs(build))
        tests = {}
        for rx in sorted({m.tests for m in runnable if build_of(m) == build}):  # ctest's regex allows 9 groups
            tests.update(ctest_tests(build, rx))
        if build_targets(build, targets_for(build, tests), os.path.join(logs, "baseline-build-%s.log" % name), a.jobs):
            print("mutants: error: the unmutated tree does not build, see %s" % os.path.join(logs, "baseline-build-%s.log" % name))
            return 2
        print("mutants: unmutated %s of %d tests' targets in %.0f s" % (name, len(tests), time.time() - start))

    killers = {}  # mutant id -> the tests that failed with it planted
    for i, m in enumerate(runnable, 1):
        t0 = time.time()
        if a.budget is not None and t0 - start > a.budget:
            verdicts[m.id] = ("NOT-RUN", "time budget of %.0f s spent" % a.budget, 0.0)
            print("mutants: [%d/%d] %-12s %-44s  time budget spent" % (i, len(runnable), "NOT-RUN", m.id))
            continue
        log_build = os.path.join(logs, "%s.build.log" % m.id)
        build = build_of(m)
        tests = ctest_tests(build, m.tests)
        if not tests:
            verdicts[m.id] = ("ERROR", "tests %r matches no ctest test" % m.tests, 0.0)
        else:
            timeout = max(a.timeout, int(5 * max(base_secs.get(t, 0.0) for t in tests)) + 10)
            path, original = apply_mutant(tree, m)
            try:
                if build_targets(build, targets_for(build, tests), log_build, a.jobs):
                    verdicts[m.id] = ("BUILD-FAILED", "broken mutant, see %s" % log_build, time.time() - t0)
                else:
                    # fastest test first, one ctest call each, stopping at the first kill: a mutant most
                    # tests catch costs only the quickest of them
                    res = {}
                    for t in sorted(tests, key=lambda t: (base_secs.get(t, 0.0), t)):
                        res.update(run_ctest(build, names_regex([t]), os.path.join(logs, "%s.%s.log" % (m.id, t)), timeout))
                        if res.get(t, ("NotRun",))[0] in ("Failed", "Timeout"):
                            break
                    failed = sorted(t for t, (s, _) in res.items() if s in ("Failed", "Timeout"))
                    broken = sorted(t for t in tests if res.get(t, ("NotRun",))[0] == "NotRun" and not failed)
                    skipped = sorted(t for t, (s, _) in res.items() if s == "Skipped")
                    if failed:
                        killers[m.id] = failed
                        verdicts[m.id] = ("KILLED", "by " + " ".join(
                            t + ("(timeout)" if res[t][0] == "Timeout" else "") for t in failed), 0.0)
                    elif broken:
                        verdicts[m.id] = ("ERROR", "ctest could not run %s, see %s/%s.<test>.log" % (" ".join(broken), logs, m.id),
                                          0.0)
                    elif skipped and len(skipped) == len(tests):
                        verdicts[m.id] = ("NOT-RUN", "every named test skipped itself", 0.0)
                    else:
                        verdicts[m.id] = ("SURVIVED", "%s passed with the bug planted" % " ".join(sorted(res)), 0.0)
            finally:
                restore(path, original)
        v, d, _ = verdicts[m.id]
        verdicts[m.id] = (v, d, time.time() - t0)
        print("mutants: [%d/%d] %-12s %-44s %5.1f s  %s" % (i, len(runnable), v, m.id, time.time() - t0, d),
              flush=True)

    # the killers, unmutated: a test that fails without the bug killed nothing
    by_build = {}
    for mid, ts in killers.items():
        build = build_of(next(m for m in runnable if m.id == mid))
        by_build.setdefault(build, set()).update(ts)
    for build, need in sorted(by_build.items()):
        t0 = time.time()
        need = sorted(need)
        res = {}
        name = os.path.basename(build)
        if build_targets(build, targets_for(build, {t: None for t in need}),
                         os.path.join(logs, "baseline-build-%s.log" % name), a.jobs):
            res = {t: ("Failed", 0.0) for t in need}  # (the restored tree not building is the tree's fault)
        else:
            for t in need:
                res.update(run_ctest(build, names_regex([t]), os.path.join(logs, "baseline.%s.%s.log" % (name, t)), 1500))
        bad = sorted(t for t in need if res.get(t, ("NotRun",))[0] not in ("Passed", "Skipped"))
        print("mutants: baseline of the %d killing tests (%s) in %.0f s%s" % (
            len(need), name, time.time() - t0, "; FAILING: " + " ".join(bad) if bad else ""))
        for mid, ts in killers.items():
            if build_of(next(m for m in runnable if m.id == mid)) != build:
                continue
            if set(ts) & set(bad):
                verdicts[mid] = ("ERROR", "baseline fails: %s (it cannot kill)" % " ".join(sorted(set(ts) & set(bad))),
                                 verdicts[mid][2])

    # summary
    print("\n%-12s %-44s %7s  %s" % ("verdict", "id", "seconds", "detail"))
    for m in mutants:
        v, d, s = verdicts[m.id]
        print("%-12s %-44s %7.1f  %s" % (v, m.id, s, d))
    counts = {}
    for v, _, _ in verdicts.values():
        counts[v] = counts.get(v, 0) + 1
    order = ("KILLED", "SURVIVED", "BUILD-FAILED", "ERROR", "NOT-RUN")
    print("\nmutants: %s in %.0f s" % (", ".join("%d %s" % (counts.get(k, 0), k) for k in order), time.time() - start))
    bad = sum(counts.get(k, 0) for k in ("SURVIVED", "BUILD-FAILED", "ERROR"))
    if bad:
        print("mutants: FAILED: %d mutant(s) survived or are broken" % bad)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
