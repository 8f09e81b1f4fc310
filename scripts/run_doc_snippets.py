#!/usr/bin/env python3
"""Runs the code blocks of a markdown page (CTest docs_api_snippets):

    run_doc_snippets.py PAGE.md --build BUILD [--work DIR] [--python PY]

Every fenced block must follow a marker line
    <!-- snippet: run -->             a ```c block is compiled (C99, against
                                      include/ and BUILD's libhqekv.so) and run;
                                      a ```python block runs with
                                      PYTHONPATH=BUILD/python
    <!-- snippet: covered-by NAME -->  another CTest runs it (NAME must be an
                                      add_test name in the tree's CMake files)
Blocks run with the repository root as working directory (so
models/refmodel-4l.gguf resolves) and must exit 0. A block without a marker
is an error: a snippet nobody runs is a snippet that rots."""
import argparse
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def blocks(text):
    """(line number, marker or None, language, code) of every fenced block."""
    lines = text.split("\n")
    out, i, marker = [], 0, None
    while i < len(lines):
        line = lines[i]
        m = re.match(r"<!-- snippet: (.*?) -->\s*$", line)
        if m:
            marker = m.group(1).strip()
        elif line.startswith("```"):
            lang, start, body = line[3:].strip(), i + 1, []
            i += 1
            while i < len(lines) and not lines[i].startswith("```"):
                body.append(lines[i])
                i += 1
            out.append((start, marker, lang, "\n".join(body) + "\n"))
            marker = None
        elif line.strip():
            marker = None if not line.startswith("<!--") else marker
        i += 1
    return out


def test_names():
    names = set()
    for d, _, files in os.walk(ROOT):
        if "/build" in d or "/.git" in d or "node_modules" in d:
            continue
        for f in files:
            if f == "CMakeLists.txt" or f.endswith(".cmake"):
                with open(os.path.join(d, f), encoding="utf-8", errors="replace") as fh:
                    names.update(re.findall(r"add_test\(NAME\s+([A-Za-z0-9_]+)", fh.read()))
    return names


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("page")
    ap.add_argument("--build", required=True)
    ap.add_argument("--work", default=None)
    ap.add_argument("--python", default=sys.executable, help="interpreter of the python blocks")
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    work = os.path.abspath(a.work or os.path.join(build, "doc-snippets"))
    os.makedirs(work, exist_ok=True)
    with open(a.page, encoding="utf-8") as f:
        found = blocks(f.read())
    known = test_names()
    failures, ran = 0, 0
    env = dict(os.environ, PYTHONPATH=os.path.join(build, "python"), LD_LIBRARY_PATH=build)
    env.pop("HQEKV_MODEL", None)
    for line, marker, lang, code in found:
        where = f"{a.page}:{line}"
        if marker is None:
            print(f"{where}: ```{lang} block without a <!-- snippet: ... --> marker")
            failures += 1
            continue
        if marker.startswith("covered-by "):
            name = marker.split()[1]
            if name not in known:
                print(f"{where}: covered-by {name}: no add_test(NAME {name}) in the tree")
                failures += 1
            continue
        if marker != "run":
            print(f"{where}: unknown marker '{marker}'")
            failures += 1
            continue
        if lang == "python":
            cmd = [a.python, "-c", code]
        elif lang == "c":
            src, exe = os.path.join(work, f"snippet_{line}.c"), os.path.join(work, f"snippet_{line}")
            with open(src, "w", encoding="utf-8") as f:
                f.write(code)
            cc = subprocess.run(["cc", "-std=c99", "-pedantic-errors", "-Wall", "-Werror",
                                 "-Wno-unused-variable", "-I", os.path.join(ROOT, "include"), src,
                                 "-o", exe, "-L", build, "-lhqekv", f"-Wl,-rpath,{build}"],
                                capture_output=True, text=True)
            if cc.returncode != 0:
                print(f"{where}: does not compile:\n{cc.stderr}")
                failures += 1
                continue
            cmd = [exe]
        else:
            print(f"{where}: 'snippet: run' on a ```{lang} block (only c and python run)")
            failures += 1
            continue
        r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
        ran += 1
        status = "ok" if r.returncode == 0 else f"FAILED (exit {r.returncode})"
        print(f"{where}: ```{lang}: {status}")
        if r.returncode != 0:
            print(r.stdout[-2000:], r.stderr[-2000:])
            failures += 1
    print(f"{ran} snippet(s) run, {len(found) - ran} covered elsewhere or refused, {failures} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
