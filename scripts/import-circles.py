#!/usr/bin/env python3
"""The file-level import graph of one crate's src/ and its circles: `python3 scripts/import-circles.py
launcher/analysis/src [-v]` (exit 1 on a circle). An import: `use crate::..`/`super::..`/`self::..`/
child-module paths (`pub use` included), and inline paths `crate::x::f`, `super::x`, `child::f`;
a parent's `mod x;` is containment, not an import. In an inline `mod tests`, `super` is the file."""
import os, re, sys
root = sys.argv[1]
files = {}
for d, _, fs in os.walk(root):
    for f in fs:
        if f.endswith('.rs'):
            p = os.path.join(d, f); rel = os.path.relpath(p, root)[:-3].split(os.sep)
            if rel[-1] in ('lib', 'main', 'mod'): rel = rel[:-1]
            files[tuple(rel)] = os.path.relpath(p, root)
def strip(src):
    src = re.sub(r'//[^\n]*', '', src)
    src = re.sub(r'"(\\.|[^"\\])*"', '""', src)
    return src
def expand(tree):
    tree = tree.strip()
    m = re.match(r'^(.*?)\{(.*)\}$', tree, re.S)
    if not m: return [tree]
    prefix, inner = m.group(1), m.group(2)
    parts, depth, cur = [], 0, ''
    for c in inner:
        if c == '{': depth += 1
        if c == '}': depth -= 1
        if c == ',' and depth == 0: parts.append(cur); cur = ''
        else: cur += c
    parts.append(cur)
    out = []
    for p in parts:
        if p.strip(): out += [prefix + q for q in expand(p)]
    return out
edges = {}
for mod, path in files.items():
    src = strip(open(os.path.join(root, path)).read())
    children = {m[-1] for m in files if len(m) == len(mod) + 1 and m[:len(mod)] == mod}
    children |= set(re.findall(r'\bmod\s+(\w+)\s*;', src))
    test_at = re.search(r'#\[cfg\(test\)\]\s*mod\s+\w+\s*\{', src)
    targets = set()
    def resolve(p, in_test):
        segs = [s.strip() for s in re.sub(r'\s+as\s+\w+$', '', p.strip()).split('::') if s.strip()]
        if not segs: return
        base = list(mod)
        if segs[0] == 'crate': base = []; segs = segs[1:]
        elif segs[0] in ('super', 'self'):
            if in_test:  # inside an inline `mod tests`: super is the file itself
                if segs[0] == 'super': segs = segs[1:]
                elif segs[0] == 'self': return
            while segs and segs[0] in ('super', 'self'):
                if segs[0] == 'super': base = base[:-1]
                segs = segs[1:]
        elif segs[0] in children: pass
        else: return
        full = base + [s for s in segs if s not in ('self', '*')]
        for n in range(len(full), -1, -1):
            if tuple(full[:n]) in files:
                t = tuple(full[:n])
                if t != mod: targets.add(t)
                return
    for m in re.finditer(r'\buse\s+([^;]+);', src):
        for p in expand(m.group(1)): resolve(p, bool(test_at and m.start() > test_at.start()))
    src_nouse = re.sub(r'\buse\s+[^;]+;', '', src)
    test_at = re.search(r'#\[cfg\(test\)\]\s*mod\s+\w+\s*\{', src_nouse)
    for m in re.finditer(r'\b((?:crate|super|self|\w+)(?:::\w+)+)', src_nouse):
        first = m.group(1).split('::')[0]
        if first in ('crate', 'super', 'self') or first in children:
            resolve(m.group(1), bool(test_at and m.start() > test_at.start()))
    edges[mod] = targets
# Tarjan
index, low, stack, on, sccs, i = {}, {}, [], set(), [], [0]
sys.setrecursionlimit(10000)
def sc(v):
    index[v] = low[v] = i[0]; i[0] += 1; stack.append(v); on.add(v)
    for w in edges[v]:
        if w not in index: sc(w); low[v] = min(low[v], low[w])
        elif w in on: low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        c = []
        while True:
            w = stack.pop(); on.discard(w); c.append(w)
            if w == v: break
        if len(c) > 1: sccs.append(c)
for v in edges:
    if v not in index: sc(v)
if '-v' in sys.argv:
    for v in sorted(edges): print(files[v], '->', ' '.join(sorted(files[w] for w in edges[v])))
for c in sccs:
    print('CIRCLE (%d files):' % len(c), ' '.join(sorted(files[v] for v in c)))
    cs = set(c)
    for v in sorted(c): print('   ', files[v], '->', ' '.join(sorted(files[w] for w in edges[v] if w in cs)))
print('%d files, %d circles' % (len(files), len(sccs)))
sys.exit(1 if sccs else 0)
