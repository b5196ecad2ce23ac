#!/usr/bin/env python3
"""fit_small_model.py - checks the small-M planner's cost model (fk_small_cost in
gemm/sm90/small.cu, written out again below) against the launch-shape
sweeps that `bench_gemm --small-sweep` prints: for every swept shape, the launch
shape the model picks, its measured time, and the best measured one.

Usage: python3 bench/profile/fit_small_model.py SWEEP.log... [--slots4 N] [--grid]
  --slots4: clusters of 4 CTAs of the small-M kernel that fit on the GPU at
            once (what the planner counts in fk_small_cluster_slots; 30 on
            an H100 SXM, the default).
  --grid:   also search the model's constants for the lowest mean regret
            (measured time of the pick / best), with no shape slower than
            under the constants in the C code by more than 3%.
Only picks among the swept launch shapes count (the sweep skips grids of fewer
than 16 or more than 264 CTAs). Plain Python, no packages."""
import itertools
import re
import sys

C_PARAMS = dict(share_min=0.95, split=12000.0, floor=7500.0, bw2=20.0, wave=20000.0)


def nt_of(m):
    return 32 if m <= 32 else 64 if m <= 64 else 128


def cost(shape, cfg, slots, P, sms=132):
    """fk_small_cost: shape (M, N, K), cfg (R, split, multicast, column split)."""
    m, n, k = shape
    r, s, mc, cs = cfg
    nt = nt_of(m)
    bands = -(-n // r)
    clusters = -(-bands // mc)
    waves = -(-clusters // slots[s * mc])
    active = min(clusters, slots[s * mc]) * s * mc
    bw = 2 if r > 64 else 1
    share = max(active / sms, P['share_min'])
    mem = (r * 128.0 + 0.11 * min(m, nt) * 128.0 / mc) * share
    mma = 62.5 * 0.5 * nt * 2.2 if cs else 62.5 * nt * bw
    per = max(mem, mma, P['floor']) + (P['bw2'] * nt if bw == 2 else 0.0)
    kc = -(-(-(-k // 128)) // s)
    return waves * (kc * per + P['split'] * (s - 1) + (2000.0 if mc > 1 else 0.0) + P['wave'])


def read(paths):
    data = {}
    for path in paths:
        for line in open(path):
            g = re.match(r'\s+sweep (\d+)x(\d+)x(\d+) split (\d) mc (\d) cs (\S+):(.*)', line)
            if not g:
                continue
            m, n, k, s, mc = map(int, g.groups()[:5])
            for r, t in re.findall(r'R(\d+) ([\d.]+)', g.group(7)):
                r, t = int(r), float(t)
                cs = 1 if g.group(6) == 'auto' and nt_of(m) >= 64 and r <= 64 else 0
                if t > 0:
                    data.setdefault((m, n, k), {})[(r, s, mc, cs)] = t
    return data


def picks(data, slots, P):
    """(shape, pick, its time, best time) over the planner's candidates:
    multicast off, column split where the planner takes it."""
    out = []
    for shape, d in sorted(data.items()):
        nt = nt_of(shape[0])
        cands = [c for c in ((r, s, 1, 1 if nt >= 64 and r <= 64 else 0)
                             for s in (1, 2, 4) for r in range(8, 129, 8)) if c in d]
        if not cands:
            continue
        pick = min(cands, key=lambda c: cost(shape, c, slots, P))
        out.append((shape, pick, d[pick], min(d[c] for c in cands)))
    return out


def main():
    args = sys.argv[1:]
    slots4 = 30
    if '--slots4' in args:
        i = args.index('--slots4')
        slots4 = int(args[i + 1])
        del args[i:i + 2]
    grid = '--grid' in args
    paths = [a for a in args if a != '--grid']
    if not paths:
        sys.exit(__doc__)
    data = read(paths)
    slots = {1: 132, 2: 66, 4: slots4, 8: slots4 // 2}
    base = picks(data, slots, C_PARAMS)
    for shape, pick, t, best in base:
        print('%-16s pick R%-3d split %d cs %d  %6.1f us   best %6.1f   %.3f' %
              ('x'.join(map(str, shape)), pick[0], pick[1], pick[3], t, best, t / best))
    mean = sum(t / b for _, _, t, b in base) / len(base)
    print('C constants: mean %.4f of the best, worst %.3f over %d shapes' %
          (mean, max(t / b for _, _, t, b in base), len(base)))
    if not grid:
        return
    ref = {p[0]: p[2] for p in base}
    found = []
    for sm, sp, fl, b2, wv in itertools.product((0.8, 0.9, 0.95, 1.0), (8000, 12000, 16000, 24000, 34000),
                                                (5400, 6500, 7500, 8000), (0, 20, 40, 80), (8000, 20000)):
        P = dict(share_min=sm, split=sp, floor=fl, bw2=b2, wave=wv)
        res = picks(data, slots, P)
        if any(t > 1.03 * ref[s] for s, _, t, _ in res):
            continue
        found.append((sum(t / b for _, _, t, b in res) / len(res), P))
    found.sort(key=lambda x: x[0])
    for mean, P in found[:8]:
        print('%.4f %s' % (mean, P))


if __name__ == '__main__':
    main()
