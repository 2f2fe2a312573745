"""When the event loop's next event falls (archsim/engine/kernels.py), in cycles: the flows moved
to it, the earliest of their ends, and the sequences' own next events in a min tree (the earliest
and the due ones found without a pass over all sequences).
"""

from __future__ import annotations

from archsim.engine.cores import EPS
from archsim.engine.sharing import INF
from archsim.jit import njit_ieee, njit_inline


@njit_ieee
def move_flows(left, rate, end, drained, count, dt, t_next):
    """Move the first `count` flows (compact arrays) on by `dt` cycles to `t_next`: their bytes
    left, their ends from `t_next` on (`end`), and whether each `drained`: within EPS cycles of
    its end, or so close that its end cannot be told from `t_next` in float time (at huge cycle
    counts). Returns how many drained. Division by a zero rate gives inf rather than raising (a
    flow of no rate never ends), so that the loop runs as vector instructions."""
    n = 0
    for i in range(count):
        left_i = left[i] - rate[i] * dt
        left[i] = left_i
        end_i = t_next + left_i / rate[i]
        end[i] = end_i
        done = (left_i <= rate[i] * EPS) | (end_i <= t_next)
        drained[i] = done
        n += done
    return n


@njit_ieee
def ends_from_rates(flow, rates, rate, left, end, count, t):
    """The first `count` flows' (compact arrays: each `flow`'s number) rates from `rates` (one
    place per flow) and their ends from `t` on (`end`, t + left / rate), each worked out again
    whether or not its rate changed: one whose did not has that end already, from the same
    numbers (`move_flows` at t), so that the loop runs as vector instructions."""
    for i in range(count):
        rate[i] = rates[flow[i]]
        end[i] = t + left[i] / rate[i]


@njit_inline
def earliest(values, count):
    """The least of `values[:count]` (INF if none), in four running minima: the same number
    whatever the order, as no value is NaN."""
    m0 = m1 = m2 = m3 = INF
    i = 0
    while i + 4 <= count:
        m0 = min(m0, values[i])
        m1 = min(m1, values[i + 1])
        m2 = min(m2, values[i + 2])
        m3 = min(m3, values[i + 3])
        i += 4
    while i < count:
        m0 = min(m0, values[i])
        i += 1
    return min(min(m0, m1), min(m2, m3))


@njit_inline
def tree_set(tree, leaves, s, value):
    """Set sequence s's next event in the min tree `tree` (its `leaves` leaves from index
    `leaves`; tree[1] the earliest of all), updating the nodes above it while they change."""
    i = leaves + s
    tree[i] = value
    i >>= 1
    while i >= 1:
        low = min(tree[2 * i], tree[2 * i + 1])
        if tree[i] == low:
            break
        tree[i] = low
        i >>= 1


@njit_inline
def tree_due(tree, leaves, t, out, count, taken, stack):
    """Append to `out` (from `count`) every sequence whose next event in `tree` is at or before
    `t` and that is not yet `taken` (marking it); the new count. `stack` is scratch."""
    if tree[1] > t:
        return count
    stack[0] = 1
    depth = 1
    while depth:
        depth -= 1
        i = stack[depth]
        if i >= leaves:
            s = i - leaves
            if not taken[s]:
                taken[s] = True
                out[count] = s
                count += 1
            continue
        if tree[2 * i] <= t:
            stack[depth] = 2 * i
            depth += 1
        if tree[2 * i + 1] <= t:
            stack[depth] = 2 * i + 1
            depth += 1
    return count
