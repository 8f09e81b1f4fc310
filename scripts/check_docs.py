#!/usr/bin/env python3
"""Checks that the paths the docs name exist, and that the symbols they tie to a file are in it.

Reads every Markdown file under docs/ (except docs/history/, the archived log, which keeps the
paths as they were when it was written) and every README*.md of the tree, outside fenced code
blocks, and checks:
  1. every inline-code span (`...`) word that looks like a repository path exists: a path that
     starts with a top-level folder of the tree (src/, docs/, tests/, scripts/, ...), or with a
     module folder of src/ (`core/half.h` is src/core/half.h), or with hqekv/ (include/hqekv/);
     `a.{h,cc}` must exist in each form, a word with * or ? must match a file, `path:12` and
     `path:12-30` name a file and lines, and a path without extension may name `path.*`;
  2. every Markdown link target ([text](target)) that is not a URL or an anchor exists,
     relative to the file that links it, and inside the repository;
  3. no inline-code path leaves the repository (`../shared/...`, `/work/...`);
  4. where a doc writes `PATH` (`SYMBOL`) -- a path followed by one code span in parentheses --
     SYMBOL (its last ::-part) occurs in that file (in one of the files, for a brace or glob
     form), so that "the policy table is `src/policy/policy_table.cc` (`kPolicyTable`)" stays
     true when the table moves;
  5. in a checklist table (header `| what | where |`), every row's `where` cell names at least
     one repository path, so a row cannot lose its file silently.
Paths under build/ and the few out-of-tree names in ALLOW, and the other projects' paths in
FOREIGN, are not checked.

Usage: scripts/check_docs.py [--root DIR] [FILE.md ...]
Prints one line per problem, "file:line: what", and exits 1 if there is any; 0 otherwise.
"""
import argparse
import glob
import os
import re
import sys

# Paths that a doc may name although the tree does not hold them: generated or out of tree.
ALLOW = [
    re.compile(r'^build[^/]*/'),  # build trees (build/, build-asan/, build-tidy/)
    re.compile(r'^out/'),  # scripts' default output folders
    re.compile(r'^eval-out'),
    re.compile(r'^tests/server/node/'),  # npm install target of the server's node test
    re.compile(r'^models/.*\.(gguf|bin|json|model)$'),  # downloaded by scripts/get-models.sh
    re.compile(r'^docs/results/'),  # written by `hqekv eval` / `study` runs
    re.compile(r'^/tmp/'),  # scratch folders in example commands
]
# Paths of another project that a doc names as such (doc, path): not this tree's files.
FOREIGN = {
    ('docs/server.md', 'tools/server/README.md'),  # llama.cpp's server README
    ('docs/server.md', 'examples/server/README.md'),  # its former place
    ('tests/data/ggml-quants/README.md', 'src/ggml-quants.c'),  # ggml's reference quantizers
    ('tests/data/ggml-quants/README.md', 'src/ggml-impl.h'),
}
SKIP_DIRS = {'.git', 'node_modules', '__pycache__'}
CODE = re.compile(r'(?<!`)`([^`\n]+)`(?!`)')
LINK = re.compile(r'\[[^\]\n]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)')
CLAIM = re.compile(r'`([^`\n]+)`\s*\(`([A-Za-z_][A-Za-z0-9_:]*)`\)')
FENCE = re.compile(r'^\s*(```|~~~)')
PATHCHARS = re.compile(r'^[A-Za-z0-9_./*?{},<>+-]+$')


def markdown_files(root):
    out = []
    for dirpath, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith('build'))
        rel = os.path.relpath(dirpath, root)
        for fn in sorted(files):
            if not fn.endswith('.md'):
                continue
            path = os.path.normpath(os.path.join(rel, fn))
            if path.startswith('docs' + os.sep):
                if not path.startswith(os.path.join('docs', 'history') + os.sep):
                    out.append(path)
            elif fn.startswith('README'):
                out.append(path)
    return out


def expand(word):
    """`a.{h,cc}` -> [a.h, a.cc]; one brace group is enough for the docs."""
    m = re.search(r'\{([^{}]*)\}', word)
    if not m:
        return [word]
    return [word[:m.start()] + alt + word[m.end():] for alt in m.group(1).split(',')]


def exists(root, rel):
    full = os.path.join(root, rel)
    if any(c in rel for c in '*?'):
        return bool(glob.glob(full))
    if os.path.exists(full):
        return True
    base = os.path.basename(rel.rstrip('/'))
    if '.' not in base and not rel.endswith('/'):  # `lm/logprob` names lm/logprob.{h,cc}
        return bool(glob.glob(full + '.*'))
    return False


class Checker:
    def __init__(self, root):
        self.root = root
        self.top = {d for d in os.listdir(root)
                    if os.path.isdir(os.path.join(root, d)) and not d.startswith(('.', 'build'))}
        self.top_files = {f for f in os.listdir(root) if os.path.isfile(os.path.join(root, f))}
        src = os.path.join(root, 'src')
        self.modules = {d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d))}
        self.problems = []

    def repo_path(self, word):
        """The repository-relative form of a code word, or None if it is not a path."""
        word = word.strip().rstrip('.,;')
        word = re.sub(r':\d+(-\d+)?(,\d+(-\d+)?)*$', '', word)  # file:line, file:a-b
        if word in self.top_files:
            return word  # README.md, CMakeLists.txt
        if '/' not in word or not PATHCHARS.match(word) or '<' in word or '>' in word:
            return None
        if word.startswith('./'):
            word = word[2:]
        first = word.split('/', 1)[0]
        if first in self.top:
            return word
        if first in self.modules:
            return 'src/' + word
        if first == 'hqekv' and word.endswith('.h'):
            return 'include/' + word
        if first == '..' or word.startswith(('/work/', '/home/')):
            return word  # checked as "outside the repository"
        return None  # other absolute words are URL routes (/health) or system files (/dev/full)

    def allowed(self, rel):
        return any(p.search(rel) for p in ALLOW)

    def report(self, doc, no, what):
        self.problems.append(f'{doc}:{no}: {what}')

    def check_word(self, doc, no, word):
        rel = self.repo_path(word)
        if rel is None or self.allowed(rel) or (doc, rel) in FOREIGN:
            return
        if rel.startswith(('../', '/')):
            self.report(doc, no, f'{rel} is outside the repository')
            return
        for form in expand(rel):
            if not exists(self.root, form):
                self.report(doc, no, f'{form} missing')

    def check_link(self, doc, no, target):
        if re.match(r'^[a-z][a-z0-9+.-]*:', target) or target.startswith('#'):
            return  # URL, mailto:, in-page anchor
        target = target.split('#', 1)[0]
        if not target:
            return
        full = os.path.normpath(os.path.join(self.root, os.path.dirname(doc), target))
        rel = os.path.relpath(full, self.root)
        if rel.startswith('..'):
            self.report(doc, no, f'link {target} leaves the repository')
        elif not self.allowed(rel) and not os.path.exists(full):
            self.report(doc, no, f'{rel} missing (link {target})')

    def check_claim(self, doc, no, path_word, symbol):
        rel = self.repo_path(path_word)
        if rel is None or self.allowed(rel):
            return
        files = []
        for form in expand(rel):
            files += [f for f in glob.glob(os.path.join(self.root, form)) if os.path.isfile(f)]
        if not files:
            return  # reported as missing by check_word
        name = symbol.split('::')[-1]
        word = re.compile(r'\b' + re.escape(name) + r'\b')
        for f in files:
            with open(f, errors='replace') as fh:
                if word.search(fh.read()):
                    return
        self.report(doc, no, f'{symbol} not found in {rel}')

    def check_checklist_row(self, doc, no, line):
        cells = [c.strip() for c in line.strip().strip('|').split('|')]
        if len(cells) < 2 or set(cells[-1]) <= set('-: '):
            return  # the separator row
        for span in CODE.findall(cells[-1]):
            if any(self.repo_path(w) for w in span.split()):
                return
        self.report(doc, no, 'checklist row names no repository path in its "where" cell')

    def check_file(self, doc):
        fenced = False
        checklist = False  # inside a `| what | where |` table
        with open(os.path.join(self.root, doc), errors='replace') as fh:
            for no, line in enumerate(fh, 1):
                if FENCE.match(line):
                    fenced = not fenced
                    continue
                if fenced:
                    continue
                if re.match(r'^\|\s*what\s*\|\s*where\s*\|\s*$', line):
                    checklist = True
                    continue
                if checklist and line.startswith('|'):
                    self.check_checklist_row(doc, no, line)
                else:
                    checklist = False
                for span in CODE.findall(line):
                    for word in span.split():
                        self.check_word(doc, no, word)
                for target in LINK.findall(line):
                    self.check_link(doc, no, target)
                for path_word, symbol in CLAIM.findall(line):
                    self.check_claim(doc, no, path_word, symbol)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--root', default=os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
    ap.add_argument('files', nargs='*', help='Markdown files (relative to the root); default all')
    args = ap.parse_args()
    root = os.path.abspath(args.root)
    checker = Checker(root)
    docs = args.files or markdown_files(root)
    for doc in docs:
        checker.check_file(doc)
    for p in checker.problems:
        print(p, file=sys.stderr)
    if checker.problems:
        print(f'check_docs: {len(checker.problems)} problem(s) in {len(docs)} Markdown files',
              file=sys.stderr)
        return 1
    print(f'check_docs: the paths and symbols named in {len(docs)} Markdown files exist')
    return 0


if __name__ == '__main__':
    sys.exit(main())
