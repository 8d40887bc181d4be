"""Structural alignment: between two pairs already made (anchors), the unpaired tensors of each model are
aligned by a longest common subsequence over what they are (``match.engine.alike``)."""

from __future__ import annotations

from onnxprobe.match.ops import canonical


def align(obs_a, obs_b, used_a, used_b, take, made: list[tuple[int, int]], like) -> None:
    """LCS over (canonical op, static shape) of the unmatched tensors between consecutive anchors, each
    with its like: main-graph tensors, or tensors of the same If branch (``Observable.scope``; a branch
    runs only sometimes, and the branches of two different If nodes are no evidence of one function).
    ``take(i, j, reason)``: pair them, unless what they read says otherwise (``match``)."""
    anchors = monotonic(made)
    bounds = [(-1, -1)] + anchors + [(len(obs_a), len(obs_b))]
    for (a0, b0), (a1, b1) in zip(bounds, bounds[1:]):
        seg_a = [i for i in range(a0 + 1, a1) if i not in used_a]
        seg_b = [j for j in range(b0 + 1, b1) if j not in used_b]
        if not seg_a or not seg_b or len(seg_a) * len(seg_b) > 250_000:
            continue

        def same(i: int, j: int) -> bool:
            return like(obs_a[i], obs_b[j])

        n, m = len(seg_a), len(seg_b)
        L = [[0] * (m + 1) for _ in range(n + 1)]
        for x in range(n - 1, -1, -1):
            for y in range(m - 1, -1, -1):
                L[x][y] = L[x + 1][y + 1] + 1 if same(seg_a[x], seg_b[y]) else max(L[x + 1][y], L[x][y + 1])
        x = y = 0
        while x < n and y < m:
            if same(seg_a[x], seg_b[y]):
                a = obs_a[seg_a[x]]
                take(seg_a[x], seg_b[y], f"aligned by op order ({canonical(a.effective_op)}) and shape between matched neighbours")
                x += 1
                y += 1
            elif L[x + 1][y] >= L[x][y + 1]:
                x += 1
            else:
                y += 1


def monotonic(idx: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The longest chain of pairs increasing in both models' orders (crossing pairs are no anchors)."""
    import bisect

    idx = sorted(idx)
    # patience sorting, O(n log n) (keeping every chain was O(n^2) in time and memory: seconds for 8,000
    # pairs): tails[k] is the pair that ends the increasing chain of length k + 1 on the smallest j
    tails: list[int] = []
    tail_js: list[int] = []
    before: list[int] = [-1] * len(idx)
    for k, (_, j) in enumerate(idx):
        at = bisect.bisect_left(tail_js, j)
        before[k] = tails[at - 1] if at else -1
        if at == len(tails):
            tails.append(k)
            tail_js.append(j)
        else:
            tails[at], tail_js[at] = k, j
    chain, k = [], tails[-1] if tails else -1
    while k >= 0:
        chain.append(idx[k])
        k = before[k]
    return chain[::-1]
