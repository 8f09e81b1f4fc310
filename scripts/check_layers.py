#!/usr/bin/env python3
"""Checks that hqekv's module graph is the one CMake declares, and draws it.

Each directory src/<m>/, sub-folders included (src/eval/run/...), is one
module, built as the static library hqekv_<m> by `hqekv_module(<m> DEPS ...)`
in CMakeLists.txt; the CLI (src/cli) is the
executable `hqekv`, whose modules are listed in `target_link_libraries(hqekv
PRIVATE ...)`. A file includes another module's header as "other/file.h" (or
"other/sub/file.h"); the first folder names the module.

The rules, each checked here and failing with a message that names the file
and line:
  1. every cross-module #include in src/<m>/ names a module that hqekv_<m>
     declares as a DIRECT dependency (a transitive one is not enough: the
     declaration must say what the code uses);
  2. every declared dependency is used by at least one #include (CMake does
     not chain modules the code does not use);
  3. the declared graph has no cycle;
  4. tests/<m>/ includes only modules reachable from the libraries that
     `hqekv_test_module(<m> LIBS...)` in tests/CMakeLists.txt links;
  5. docs/CONTRIBUTING.md holds the current drawing of the graph between the markers
     <!-- layers:begin --> and <!-- layers:end --> (`--write-readme` rewrites it);
  6. the newest KV format (the last quant::Kind before kCount, e.g. kIq4Nl "iq4_nl") is named
     only in its own files (quant/<name>*, tests/quant/<name>*) and in the shared files that
     docs/CONTRIBUTING.md's "add a KV format" checklist lists between <!-- format-files:begin -->
     and <!-- format-files:end --> (so the checklist says what a new format really touches).

Usage: scripts/check_layers.py [--root DIR] [--write-readme] [--print]
Exit status 0 when every rule holds, 1 otherwise (each violation on stderr).
"""
import argparse
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([A-Za-z0-9_]+)/[^"]+"')
MODULE = re.compile(r'hqekv_module\(\s*(\w+)((?:\s+DEPS)?[^)]*)\)', re.S)
CLI_LINK = re.compile(r'target_link_libraries\(\s*hqekv\s+PRIVATE([^)]*)\)', re.S)
BEGIN, END = '<!-- layers:begin -->', '<!-- layers:end -->'
FORMAT_BEGIN, FORMAT_END = '<!-- format-files:begin -->', '<!-- format-files:end -->'


def declared_graph(root):
    """{module: set(direct module deps)} from CMakeLists.txt."""
    text = open(os.path.join(root, 'CMakeLists.txt')).read()
    text = re.sub(r'#[^\n]*', '', text)  # comments may mention hqekv_module(...)
    graph = {}
    for name, rest in MODULE.findall(text):
        if name == 'name':  # the function definition itself
            continue
        graph[name] = {d[len('hqekv_'):] for d in rest.split() if d.startswith('hqekv_')}
    m = CLI_LINK.search(text)
    if m:
        graph['cli'] = {d[len('hqekv_'):] for d in m.group(1).split() if d.startswith('hqekv_')}
    return graph


def test_links(root):
    """{module: set(modules its test executable links)} from tests/CMakeLists.txt."""
    path = os.path.join(root, 'tests', 'CMakeLists.txt')
    if not os.path.exists(path):
        return {}
    text = re.sub(r'#[^\n]*', '', open(path).read())
    out = {}
    for name, rest in re.findall(r'hqekv_test_module\(\s*(\w+)([^)]*)\)', text):
        libs = {d[len('hqekv_'):] for d in rest.split() if d.startswith('hqekv_')}
        if libs:
            out[name] = libs
    return out


def includes_of(path, modules):
    """[(line_no, module)] of the project includes in one source file."""
    out = []
    with open(path, errors='replace') as f:
        for no, line in enumerate(f, 1):
            m = INCLUDE.match(line)
            if m and m.group(1) in modules:
                out.append((no, m.group(1)))
    return out


def sources(directory):
    for dirpath, _, files in sorted(os.walk(directory)):
        for fn in sorted(files):
            if fn.endswith(('.h', '.cc', '.cpp', '.hpp')):
                yield os.path.join(dirpath, fn)


def reachable(graph, start):
    seen, stack = set(), [start]
    while stack:
        m = stack.pop()
        if m in seen:
            continue
        seen.add(m)
        stack.extend(graph.get(m, ()))
    return seen


def find_cycle(graph):
    state = {}

    def visit(m, path):
        state[m] = 1
        for d in sorted(graph.get(m, ())):
            if state.get(d) == 1:
                return path + [m, d]
            if d not in state:
                c = visit(d, path + [m])
                if c:
                    return c
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state:
            c = visit(m, [])
            if c:
                return c
    return None


def layers(graph):
    """Modules grouped by depth: layer 0 depends on nothing, layer k on < k."""
    depth = {}

    def d(m):
        if m not in depth:
            depth[m] = 1 + max((d(x) for x in graph.get(m, ())), default=-1)
        return depth[m]

    for m in graph:
        d(m)
    out = {}
    for m, k in depth.items():
        out.setdefault(k, []).append(m)
    return [sorted(out[k]) for k in sorted(out)]


def drawing(graph):
    lines = ['```text', 'layer  module     uses (direct, as CMake declares and the includes use)']
    for k, mods in enumerate(layers(graph)):
        for m in mods:
            deps = ', '.join(sorted(graph[m])) or '-'
            lines.append(f'{k:>5}  {m:<10} {deps}')
    lines.append('```')
    return '\n'.join(lines)


def newest_format(root):
    """(enumerator, spec name) of the last quant::Kind before kCount, or None."""
    fmt = open(os.path.join(root, 'src', 'quant', 'format.h')).read()
    body = re.search(r'enum class Kind[^{]*\{(.*?)\};', fmt, re.S)
    if not body:
        return None
    kinds = re.findall(r'^\s*(k\w+)\s*[,=]', re.sub(r'//[^\n]*', '', body.group(1)), re.M)
    if len(kinds) < 2 or kinds[-1] != 'kCount':
        return None
    kind = kinds[-2]
    table = open(os.path.join(root, 'src', 'quant', 'format_traits.cc')).read()
    m = re.search(r'\.kind\s*=\s*Kind::' + kind + r'\s*,\s*\.name\s*=\s*"([^"]+)"', table)
    return (kind, m.group(1)) if m else None


def format_checklist_errors(root):
    """Rule 6: the newest format's footprint is its own files plus the listed shared ones."""
    readme = os.path.join(root, 'docs', 'CONTRIBUTING.md')
    text = open(readme).read() if os.path.exists(readme) else ''
    if FORMAT_BEGIN not in text or FORMAT_END not in text:
        return [f'docs/CONTRIBUTING.md: no {FORMAT_BEGIN} ... {FORMAT_END} block listing the '
                'files a new KV format edits']
    block = text[text.index(FORMAT_BEGIN):text.index(FORMAT_END)]
    listed = set(re.findall(r'`((?:src|tests|bench)/[^`]+)`', block))
    newest = newest_format(root)
    if newest is None:
        return ['src/quant/format.h / format_traits.cc: cannot find the newest quant::Kind and '
                'its row (rule 6 of scripts/check_layers.py)']
    kind, name = newest
    word = re.compile(r'\b' + kind + r'\b|"' + re.escape(name) + r'"|quant/' + re.escape(name)
                      + r'[._]')
    errors = []
    for top in ('src', 'tests', 'bench'):
        for path in sources(os.path.join(root, top)):
            rel = os.path.relpath(path, root)
            base = os.path.basename(rel)
            if base.startswith(name + '.') or base.startswith(name + '_'):
                continue  # its own files
            if rel in listed:
                continue
            with open(path, errors='replace') as f:
                for no, line in enumerate(f, 1):
                    if word.search(line):
                        errors.append(f'{rel}:{no}: names the newest KV format {kind} ("{name}") '
                                      'but docs/CONTRIBUTING.md\'s format checklist does not list '
                                      'this file: list it (a new format edits it too) or move the '
                                      'use into the format\'s own files')
                        break
    return errors


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--root', default=os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
    ap.add_argument('--write-readme', action='store_true')
    ap.add_argument('--print', action='store_true')
    args = ap.parse_args()
    root = os.path.abspath(args.root)
    graph = declared_graph(root)
    src = os.path.join(root, 'src')
    modules = {d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d))}
    errors = []

    for m in sorted(modules):
        if m not in graph:
            errors.append(f'src/{m}/: no hqekv_module({m} DEPS ...) in CMakeLists.txt')
    for m in sorted(graph):
        if m not in modules:
            errors.append(f'CMakeLists.txt: module {m} has no directory src/{m}/')

    used = {m: set() for m in graph}
    undeclared = {}
    for m in sorted(modules & set(graph)):
        for path in sources(os.path.join(src, m)):
            rel = os.path.relpath(path, root)
            for no, dep in includes_of(path, modules):
                if dep == m:
                    continue
                if dep not in graph[m]:
                    undeclared.setdefault((m, dep), []).append(f'{rel}:{no}')
                used[m].add(dep)
    for (m, dep), places in sorted(undeclared.items()):
        why = ('the wrong way: hqekv_' + dep + ' already depends on hqekv_' + m
               if m in reachable(graph, dep) else
               'undeclared (add it to DEPS in CMakeLists.txt if the dependency is right)')
        more = f' (and {len(places) - 1} more)' if len(places) > 1 else ''
        errors.append(f'{places[0]}{more}: includes "{dep}/..." but hqekv_{m} does not depend '
                      f'on hqekv_{dep}: {why}')
    for m in sorted(graph):
        for dep in sorted(graph[m] - used.get(m, set())):
            if m in modules:
                errors.append(f'CMakeLists.txt: hqekv_{m} declares hqekv_{dep}, which no file in '
                              f'src/{m}/ includes; remove it')

    cycle = find_cycle(graph)
    if cycle:
        errors.append('CMakeLists.txt: dependency cycle ' + ' -> '.join(cycle))

    tests = os.path.join(root, 'tests')
    test_libs = test_links(root)
    if os.path.isdir(tests) and not cycle:
        for m in sorted(os.listdir(tests)):
            tdir = os.path.join(tests, m)
            if m not in graph or not os.path.isdir(tdir):
                continue
            allowed = set()
            for lib in test_libs.get(m, {m}):
                allowed |= reachable(graph, lib)
            for path in sources(tdir):
                for no, dep in includes_of(path, modules):
                    if dep not in allowed:
                        errors.append(f'{os.path.relpath(path, root)}:{no}: includes "{dep}/..." '
                                      f'but test_{m} does not link it (tests/CMakeLists.txt)')

    readme = os.path.join(root, 'docs', 'CONTRIBUTING.md')
    if not cycle and os.path.exists(readme):
        text = open(readme).read()
        block = f'{BEGIN}\n{drawing(graph)}\n{END}'
        if BEGIN in text and END in text:
            current = text[text.index(BEGIN):text.index(END) + len(END)]
            if current != block:
                if args.write_readme:
                    tmp = readme + '.tmp'
                    with open(tmp, 'w') as f:
                        f.write(text.replace(current, block))
                    os.replace(tmp, readme)
                else:
                    errors.append('docs/CONTRIBUTING.md: the layer drawing is stale; run '
                                  'scripts/check_layers.py --write-readme')
        else:
            errors.append(f'docs/CONTRIBUTING.md: no {BEGIN} ... {END} block for the layer drawing')

    errors += format_checklist_errors(root)

    if args.print and not cycle:
        print(drawing(graph))
    for e in errors:
        print('layer check: ' + e, file=sys.stderr)
    if not errors:
        print(f'layer check: {len(graph)} modules, includes match CMakeLists.txt, no cycle')
    return 1 if errors else 0


if __name__ == '__main__':
    sys.exit(main())
