#!/usr/bin/env python3
"""Runs the code blocks of markdown pages (CTests docs_api_snippets and
docs_commands):

    run_doc_snippets.py PAGE.md --build BUILD [--work DIR] [--python PY]
    run_doc_snippets.py --commands PAGE.md... --build BUILD [--work DIR]

Every fenced block (with --commands: every ```sh / ```bash / ```console
block; others are left to the first form) must follow a marker line
    <!-- snippet: run -->             a ```c block is compiled (C99, against
                                      include/ and BUILD's libhqekv.so) and run;
                                      a ```python block runs with
                                      PYTHONPATH=BUILD/python; a shell block
                                      runs under bash -e -o pipefail (a
                                      ```console block: its `$ ` lines) in a
                                      fresh folder that holds links to the
                                      bundled models/, data/, profiles/ and
                                      scripts/, with BUILD (its hqekv) first
                                      on PATH
    <!-- snippet: covered-by NAME -->  another CTest runs it (NAME must be an
                                      add_test name in the tree's CMake files)
    <!-- snippet: skip REASON -->      not run, and REASON says why (needs the
                                      network, your own model, minutes...)
and, after `run`, optionally
    <!-- expect: TEXT -->             TEXT must occur in the block's output
                                      (stdout and stderr; repeatable)
    <!-- as: NAME=PATH -->            NAME (a placeholder such as model.gguf)
                                      is a link to the repository's PATH in
                                      the block's folder (repeatable)
c and python blocks run with the repository root as working directory (so
models/refmodel-4l.gguf resolves). Every block must exit 0. A block without
a marker is an error: a snippet nobody runs is a snippet that rots. Outputs
are not pinned: only exit codes and the expected lines are checked."""
import argparse
import os
import re
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


SHELL = ("sh", "bash", "console", "shell")


def blocks(text):
    """(line number, marker or None, language, code, extras) of every fenced
    block; extras: {"expect": [TEXT...], "as": [(NAME, PATH)...]}."""
    lines = text.split("\n")
    out, i, marker = [], 0, None
    extras = {"expect": [], "as": []}
    while i < len(lines):
        line = lines[i]
        m = re.match(r"<!-- snippet: (.*?) -->\s*$", line)
        e = re.match(r"<!-- expect: (.*?) -->\s*$", line)
        a = re.match(r"<!-- as: ([^=\s]+)=(\S+) -->\s*$", line)
        if m:
            marker = m.group(1).strip()
        elif e:
            extras["expect"].append(e.group(1))
        elif a:
            extras["as"].append((a.group(1), a.group(2)))
        elif line.startswith("```"):
            lang, start, body = line[3:].strip(), i + 1, []
            i += 1
            while i < len(lines) and not lines[i].startswith("```"):
                body.append(lines[i])
                i += 1
            out.append((start, marker, lang, "\n".join(body) + "\n", extras))
            marker, extras = None, {"expect": [], "as": []}
        elif line.strip():
            if not line.startswith("<!--"):
                marker, extras = None, {"expect": [], "as": []}
        i += 1
    return out


def shell_folder(work, name, links):
    """A fresh folder for one shell block: links to the bundled data, and to
    the placeholders' stand-ins."""
    d = os.path.join(work, name)
    if os.path.isdir(d):
        shutil.rmtree(d)
    os.makedirs(d)
    for sub in ("models", "data", "profiles", "scripts"):
        if os.path.exists(os.path.join(ROOT, sub)):
            os.symlink(os.path.join(ROOT, sub), os.path.join(d, sub))
    for link, path in links:
        target = os.path.join(ROOT, path)
        if not os.path.exists(target):
            return None, f"as: {link}={path}: no {path} in the repository"
        os.symlink(target, os.path.join(d, link))
    return d, None


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
    ap.add_argument("pages", nargs="+")
    ap.add_argument("--build", required=True)
    ap.add_argument("--work", default=None)
    ap.add_argument("--python", default=sys.executable, help="interpreter of the python blocks")
    ap.add_argument("--commands", action="store_true",
                    help="only the shell blocks (sh, bash, console) must be marked and are run")
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    work = os.path.abspath(a.work or os.path.join(build, "doc-snippets"))
    os.makedirs(work, exist_ok=True)
    known = test_names()
    failures, ran, seen = 0, 0, 0
    env = dict(os.environ, PYTHONPATH=os.path.join(build, "python"), LD_LIBRARY_PATH=build)
    env.pop("HQEKV_MODEL", None)
    shell_env = dict(env, PATH=build + os.pathsep + env.get("PATH", ""))
    for page in a.pages:
        with open(page, encoding="utf-8") as f:
            found = blocks(f.read())
        rel = os.path.relpath(os.path.abspath(page), ROOT)
        for line, marker, lang, code, extras in found:
            if a.commands and lang not in SHELL:
                continue
            seen += 1
            where = f"{rel}:{line}"
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
            if marker == "skip" or marker.startswith("skip "):
                if len(marker[4:].strip()) < 8:
                    print(f"{where}: 'snippet: skip' must say why the block is not run")
                    failures += 1
                continue
            if marker != "run":
                print(f"{where}: unknown marker '{marker}'")
                failures += 1
                continue
            cwd, run_env = ROOT, env
            if lang == "python":
                cmd = [a.python, "-c", code]
            elif lang == "c":
                tag = re.sub(r"\W", "_", rel) + f"_{line}"
                src, exe = os.path.join(work, f"snippet_{tag}.c"), os.path.join(work, f"snippet_{tag}")
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
            elif lang in SHELL:
                if lang == "console":
                    code = "\n".join(l[2:] for l in code.split("\n") if l.startswith("$ ")) + "\n"
                cwd, err = shell_folder(work, re.sub(r"\W", "_", rel) + f"_{line}", extras["as"])
                if cwd is None:
                    print(f"{where}: {err}")
                    failures += 1
                    continue
                cmd, run_env = ["bash", "-e", "-o", "pipefail", "-c", code], shell_env
            else:
                print(f"{where}: 'snippet: run' on a ```{lang} block (c, python and shell blocks run)")
                failures += 1
                continue
            t0 = time.monotonic()
            try:
                r = subprocess.run(cmd, cwd=cwd, env=run_env, stdin=subprocess.DEVNULL,
                                   capture_output=True, text=True, timeout=600)
            except subprocess.TimeoutExpired:
                print(f"{where}: ```{lang}: FAILED (over 600 s)")
                failures += 1
                continue
            ran += 1
            missing = [t for t in extras["expect"] if t not in r.stdout + r.stderr]
            status = "ok" if r.returncode == 0 and not missing else f"FAILED (exit {r.returncode})"
            print(f"{where}: ```{lang}: {status} ({time.monotonic() - t0:.1f} s)")
            for t in missing:
                print(f"  expected in the output, not found: {t}")
            if status != "ok":
                print(r.stdout[-2000:], r.stderr[-2000:])
                failures += 1
    print(f"{ran} block(s) run, {seen - ran} covered elsewhere, skipped with a reason or refused, "
          f"{failures} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
