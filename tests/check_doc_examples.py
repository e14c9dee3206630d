#!/usr/bin/env python3
"""Runs the examples of README.md and the documentation pages, so that none of them rots.

Every ```sh and ```python block of README.md and of the hand-written pages under docs/ carries a
marker on the line before it:
  <!-- runnable -->        run as written;
  <!-- runnable: tiny -->  run with its sizes cut down (--prompts, --steps, --pairs, ... capped,
                           the table SIZES below), since as written it takes minutes or more;
  <!-- python-example -->  the README's Python example (also run by Python.ReadmeExample);
  <!-- not run: REASON --> shown only (it needs files the page does not make, mpirun, a shell
                           session of its own, ...); the reason is required.
A block without a marker fails the check, so a new example is either run or says why not.

The blocks of one page run in order in one scratch folder, where checkpoints/, tests/ and
examples/ of the repository are linked, `iclprobe` is on PATH and the Python module on
PYTHONPATH; sh blocks run under `bash -e -o pipefail`. A Python block that imports torch or
h5py is skipped with a note when that package is missing.

    tests/check_doc_examples.py ICLPROBE_BINARY BUILD_DIR [PAGE ... | --pages-under DIR]
(default: README.md and every page under docs/)
Exits 0 when every marked block ran, 1 naming the first that failed or a block without a marker.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Generated pages hold signatures and copies, not examples (tools/gen_python_api.py,
# tools/gen_doc_copies.py, iclprobe help --markdown).
GENERATED = re.compile(r"^docs/(python\.md|cli\.md|bench_results\.md|findings/(?!index\.md).*)$")
MARKER = re.compile(r"^<!-- (runnable(?:: tiny)?|python-example|not run: .+) -->$")
# Cut-down sizes of a "runnable: tiny" block: option -> the largest value it keeps.
SIZES = {"--prompts": 300, "-N": 300, "--steps": 20, "--eval-every": 10, "--pairs": 60,
         "--fit-prompts": 300, "--train-pairs": 200, "--test-pairs": 60,
         "--calibration-prompts": 300, "--bootstrap": 50, "--max-prompts": 300,
         "--ilwd-prompts": 20, "--queries": 8, "--epochs": 2, "--seeds": 1}


def pages(args):
    """The pages named, or with --pages-under DIR every hand-written page there, or README.md
    and every hand-written page under docs/."""
    if args and args[0] != "--pages-under":
        return args
    under = args[1] if args else "docs"
    out = [] if args else ["README.md"]
    for folder, _, files in os.walk(os.path.join(ROOT, under)):
        for f in sorted(files):
            if f.endswith(".md"):
                rel = os.path.relpath(os.path.join(folder, f), ROOT)
                if not GENERATED.match(rel):
                    out.append(rel)
    return sorted(out)


def blocks(path):
    """(line, language, marker, code) of every sh and python block, in order."""
    lines = open(os.path.join(ROOT, path), encoding="utf-8").read().split("\n")
    out, i = [], 0
    while i < len(lines):
        m = re.match(r"^```(\w*)\s*$", lines[i])
        if not m:
            i += 1
            continue
        lang, start = m.group(1), i
        j = i + 1
        while j < len(lines) and not lines[j].startswith("```"):
            j += 1
        if lang in ("sh", "python"):
            before = start - 1
            while before >= 0 and not lines[before].strip():
                before -= 1
            mk = MARKER.match(lines[before].strip()) if before >= 0 else None
            out.append((start + 1, lang, mk.group(1) if mk else None,
                        "\n".join(lines[start + 1:j]) + "\n"))
        i = j + 1
    return out


def tiny(code):
    def cap(m):
        option, value = m.group(1), m.group(2)
        return "%s %d" % (option, min(int(value), SIZES[option]))
    options = "|".join(re.escape(o) for o in sorted(SIZES, key=len, reverse=True))
    return re.sub(r"(?<![\w-])(%s)[ =](\d+)\b" % options, cap, code)


def run_page(path, binary, build, problems):
    found = blocks(path)
    unmarked = [(line, lang) for line, lang, marker, _ in found if marker is None]
    for line, lang in unmarked:
        problems.append("%s:%d: a %s block without a marker (<!-- runnable -->, "
                        "<!-- runnable: tiny --> or <!-- not run: REASON -->)" % (path, line, lang))
    todo = [b for b in found if b[2] and not b[2].startswith("not run")]
    if not todo or unmarked:
        return
    scratch = tempfile.mkdtemp(prefix="doc_examples_")
    try:
        for name in ("checkpoints", "tests", "examples"):
            os.symlink(os.path.join(ROOT, name), os.path.join(scratch, name))
        env = dict(os.environ)
        env["PATH"] = os.path.dirname(os.path.abspath(binary)) + os.pathsep + env.get("PATH", "")
        env["PYTHONPATH"] = os.path.join(build, "python")
        env.setdefault("OMP_WAIT_POLICY", "passive")
        for line, lang, marker, code in todo:
            if marker == "runnable: tiny":
                code = tiny(code)
            optional = []
            if lang == "python":
                optional = re.findall(r"^import (torch|h5py)\b", code, re.M)
            if optional and subprocess.run([sys.executable, "-c", "import " + ", ".join(optional)],
                                           env=env, capture_output=True).returncode != 0:
                print("%s:%d: skipped (needs %s: Debian's python3-torch, python3-h5py)"
                      % (path, line, " and ".join(optional)))
                continue
            cmd = (["bash", "-e", "-o", "pipefail", "-c", code] if lang == "sh"
                   else [sys.executable, "-c", code])
            print("%s:%d: running (%s)" % (path, line, marker), flush=True)
            r = subprocess.run(cmd, cwd=scratch, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
            if r.returncode != 0:
                tail = "\n".join(r.stdout.splitlines()[-40:])
                problems.append("%s:%d: exit %d\n--- block ---\n%s--- output (last 40 lines) "
                                "---\n%s" % (path, line, r.returncode, code, tail))
                return
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    binary, build = sys.argv[1], sys.argv[2]
    problems = []
    for path in pages(sys.argv[3:]):
        run_page(path, binary, build, problems)
    for p in problems:
        print("FAIL " + p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
