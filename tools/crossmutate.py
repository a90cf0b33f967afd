#!/usr/bin/env python3
# crossmutate: gremlins' mutants of one package, each applied by hand and
# run against other packages' tests too (gremlins runs only the mutated
# package's own): how internal/pace's policy, tested through the Cooldown,
# was scored (bench/RESULTS.md, "Mutation score").
#
#   tools/mutate -C internal/pace -o /tmp/pace.json        # gremlins' list and its own verdicts
#   git worktree add /tmp/wt HEAD                          # a tree of its own: files are mutated in place
#   PKGS='. ./internal/pace' tools/crossmutate.py /tmp/wt /tmp/pace.log /tmp/pace.json internal/pace
#
# Every mutant gremlins did not kill is applied at its line and column
# (CONDITIONALS_BOUNDARY, CONDITIONALS_NEGATION, ARITHMETIC_BASE,
# INCREMENT_DECREMENT, INVERT_NEGATIVES), `go test -count=1 -failfast` of
# PKGS runs, and the file is restored; a line per mutant goes to the log
# (KILLED, LIVED, TIMED OUT, NOT VIABLE). SKIP is a -skip pattern. A run
# stopped with a signal may leave its last mutant in the tree: use a
# worktree, and `git checkout -- .` it after.
import json, subprocess, sys, time, os, shutil
root = sys.argv[1]            # a worktree of the repo
out = sys.argv[2]
d = json.load(open(sys.argv[3]))
BOUND = {'<': '<=', '<=': '<', '>': '>=', '>=': '>'}
NEG = {'==': '!=', '!=': '==', '<': '>=', '<=': '>', '>': '<=', '>=': '<'}
ARITH = {'+': '-', '-': '+', '*': '/', '/': '*', '%': '*'}
INC = {'++': '--', '--': '++'}
def mutate(line, col, typ):
    i = col - 1
    for op in ('<=', '>=', '==', '!=', '++', '--', '<', '>', '+', '-', '*', '/', '%'):
        if line.startswith(op, i):
            break
    else:
        return None
    table = {'CONDITIONALS_BOUNDARY': BOUND, 'CONDITIONALS_NEGATION': NEG, 'ARITHMETIC_BASE': ARITH,
             'INCREMENT_DECREMENT': INC, 'INVERT_NEGATIVES': {'-': ''}}[typ]
    if op not in table:
        return None
    return line[:i] + table[op] + line[i + len(op):]
done = set()
if os.path.exists(out):
    for l in open(out):
        w = l.split()
        if len(w) > 2: done.add((w[1], w[2]))
skip = os.environ.get('SKIP', '')
with open(out, 'a') as log:
    for f in d['files']:
        path = os.path.join(root, sys.argv[4] if len(sys.argv) > 4 else 'internal/pace', f['file_name'])
        orig = open(path).read()
        lines = orig.split('\n')
        for m in f['mutations']:
            if m['status'] == 'KILLED' or (m['type'], '%s:%d:%d' % (f['file_name'], m['line'], m['column'])) in done:
                continue
            ln = lines[m['line'] - 1]
            new = mutate(ln, m['column'], m['type'])
            if new is None:
                log.write('SKIP %s %s:%d:%d %s\n' % (m['type'], f['file_name'], m['line'], m['column'], ln.strip())); log.flush()
                continue
            mutated = lines[:]
            mutated[m['line'] - 1] = new
            open(path, 'w').write('\n'.join(mutated))
            t0 = time.time()
            try:
                p = subprocess.run(['go', 'test', '-count=1', '-failfast', '-timeout', '90s'] + (['-skip', skip] if skip else []) + (os.environ['PKGS'].split() if os.environ.get('PKGS') else ['.', './internal/pace']),
                                   cwd=root, capture_output=True, text=True, timeout=150)
                if p.returncode == 0:
                    st = 'LIVED'
                elif 'build failed' in p.stdout or 'setup failed' in p.stdout:
                    st = 'NOT VIABLE'
                elif 'panic: test timed out' in p.stdout:
                    st = 'TIMED OUT'
                else:
                    st = 'KILLED'
            except subprocess.TimeoutExpired:
                st = 'TIMED OUT'
            finally:
                open(path, 'w').write(orig)
            log.write('%s %s %s:%d:%d was %s, %.0fs: %s  =>  %s\n' % (st, m['type'], f['file_name'], m['line'], m['column'],
                      m['status'], time.time() - t0, ln.strip(), new.strip()))
            log.flush()
