"""Playing out the steps the scheduler forms: one mixed step, a run of decode-only steps at once,
or a static batch to completion. Each step's time is its GPU work (the step model; host-link
transfers; a speculative draft's proposals) composed with the host profile's work
(archsim/serving/host.py). Seconds. The per-request loops are kernels (archsim/serving/kernels.py).
"""

from __future__ import annotations

import numpy as np

from archsim.serving.instance import Books, Instance
from archsim.serving.kernels import apply_tokens, book_decodes, decode_bounds, step_shape
from archsim.serving.scheduler import Plan
from archsim.serving.speculative import expected_tokens, proposal_s
from archsim.serving.state import InstanceState
from archsim.serving.static import play_batch, take_batch

SCALAR_RUN = 24  # decode runs up to this many steps are timed step by step, longer ones as arrays


def run_step(
    s: InstanceState, plan: Plan, inst: Instance, t: float, books: Books, accept: list[float], credit: list[float]
) -> tuple[float, np.ndarray, int]:
    """One step of the plan: its end time, the requests that are done with it (emitted their
    target's last token) and the tokens it computed."""
    ids, ntok = plan.ids, plan.tokens
    shape = step_shape(ids, ntok, s.prompt, s.generated, s.computed)
    decodes, total_kv, max_kv, draft_kv, chunk, n_chunks, emits, tokens = shape
    chunks = list(zip(ntok[chunk].tolist(), s.computed[ids[chunk]].tolist())) if n_chunks else []
    spec = inst.spec
    verify = spec.verify_tokens if spec is not None and decodes else 1
    gpu = inst.timer.step_s(decodes, int(total_kv), int(max_kv), chunks, verify)
    if spec is not None and inst.draft is not None:
        gpu += proposal_s(inst.draft, decodes, int(draft_kv), int(max_kv) - verify + 1, chunks, spec.tokens)
    gpu += inst.transfer_s(s.step_transfer_bytes)
    s.step_transfer_bytes = 0.0
    if spec is not None:
        end, emit = _run_verify_step(s, plan, inst, t, books, gpu, accept, credit)
        return end, emit[s.generated[emit] >= s.target[emit]], int(tokens)
    wall = inst.host.wall_s(gpu, len(ids), int(emits))
    end = t + wall
    hist = books.itl
    emit = apply_tokens(
        ids, ntok, s.prompt, s.generated, s.computed, books.first_token, books.last_token, end, hist.counts, hist.stats
    )
    fin = emit[s.generated[emit] >= s.target[emit]]
    _register(s, ids)
    books.stepped(wall, gpu, int(emits))
    books.computed += int(tokens)
    return end, fin, int(tokens)


def _run_verify_step(
    s: InstanceState,
    plan: Plan,
    inst: Instance,
    t: float,
    books: Books,
    gpu: float,
    accept: list[float],
    credit: list[float],
) -> tuple[float, np.ndarray]:
    """A step under speculative decoding: each decode verifies its k + 1 tokens and emits the
    accepted ones and one more (a running credit of E(a, k) each verify: archsim/serving/speculative.py)."""
    p, g, c = s.prompt, s.generated, s.computed
    emit: list[int] = []
    tokens: list[int] = []
    for r, k in zip(plan.ids.tolist(), plan.tokens.tolist()):
        if k > 1 and g[r] > 0 and c[r] + 1 == p[r] + g[r]:
            credit[r] += expected_tokens(accept[r], k - 1)
            e = max(1, min(int(credit[r]), int(s.target[r] - g[r])))
            credit[r] -= e
            c[r] += e
            books.verifies += 1
            books.verify_tokens += e
            emit.append(r)
            tokens.append(e)
            continue
        c[r] += k
        if c[r] == p[r] + g[r]:
            emit.append(r)
            tokens.append(1)
    emitted = sum(tokens)
    wall = inst.host.wall_s(gpu, len(plan.ids), emitted)
    end = t + wall
    for r, e in zip(emit, tokens):
        if g[r] == 0:
            books.first_token[r] = end
        else:
            books.itl.add(end - books.last_token[r])
        g[r] += e
        books.last_token[r] = end
    _register(s, plan.ids)
    books.stepped(wall, gpu, emitted)
    books.computed += int(plan.tokens.sum())
    return end, np.array(emit, dtype=np.int64)


def _register(s: InstanceState, ids: np.ndarray) -> None:
    """Offer the prefix cache the blocks computed by requests of a prefix group."""
    if s.grouped:
        for r in ids[s.group[ids] >= 0].tolist():
            s.register(r)


def run_decodes(
    s: InstanceState,
    ids: np.ndarray,
    inst: Instance,
    t: float,
    next_arrival: float | None,
    books: Books,
    bounds: tuple[int, int, int] | None = None,
) -> tuple[int, float, np.ndarray]:
    """k >= 1 decode-only steps of every running request (all of them emit each step): up to
    the first finish, the last step the free blocks cover and the step in which the next request
    arrives (`bounds`: the run's `decode_bounds`, where the scheduler worked them out). Returns
    k, the end time and the requests done (generated their target); books the blocks, tokens
    and gaps."""
    b, timer, host = len(ids), inst.timer, inst.host
    grows = not inst.reserves
    if bounds is None:
        bounds = decode_bounds(ids, s.target, s.generated, s.computed, s.blocks, s.bs, s.free, grows)
    kmax, total_kv, max_kv = int(bounds[0]), int(bounds[1]), int(bounds[2])
    if next_arrival is not None and kmax > 1:  # no step is shorter than its non-attention part
        shortest = host.wall_s(timer.decode_fixed_s(b), b, b)
        kmax = min(kmax, int((next_arrival - t) / shortest) + 2)
    hist = books.itl
    if kmax <= SCALAR_RUN:
        h, exposed, overlap = host.host_s(b, b), host.exposed_s, host.overlap
        ends, end, gpu_total, wall_total = [], t, 0.0, 0.0
        for gpu in timer.decode_steps_s(b, total_kv, max_kv, kmax):
            wall = ((gpu if gpu > h else h) + exposed) if overlap else (gpu + h)
            end += wall
            gpu_total += gpu
            wall_total += wall
            ends.append(end)
            if next_arrival is not None and end >= next_arrival:
                break
        k, ends_arr = len(ends), np.array(ends)
    else:
        gpu_series = timer.decode_run_s(b, total_kv, max_kv, kmax)
        walls = host.wall_series_s(gpu_series, b, b)
        ends_arr = t + np.cumsum(walls)
        k = kmax if next_arrival is None else min(kmax, int(np.searchsorted(ends_arr, next_arrival, "left")) + 1)
        end, gpu_total = float(ends_arr[k - 1]), float(gpu_series[:k].sum())
        wall_total = float(walls[:k].sum())
    taken, fin = book_decodes(
        ids, s.computed, s.generated, s.target, s.blocks, s.bs if grows else 0, books.last_token, ends_arr[:k],
        hist.counts, hist.stats,
    )  # fmt: skip
    s.take_grown(int(taken))
    _register(s, ids)
    books.stepped(wall_total, gpu_total, b, k)
    books.computed += k * b
    return k, end, fin


def run_static(s: InstanceState, inst: Instance, t: float, books: Books, done: int) -> tuple[float, int, int]:
    """A static batch from the queue run to completion (archsim/serving/static.py): the time it
    ends, requests done, and the steps it took; one timeline sample per group of finishes."""
    batch = take_batch(s, inst.cfg)
    if not batch:
        raise RuntimeError("a request does not fit the KV pool on its own")
    idx = np.array(batch, dtype=np.int64)
    prompts, outs = s.prompt[idx], s.target[idx]
    run = play_batch(prompts, outs, inst.timer, inst.host, t)
    b, p_max, o_max = len(batch), int(prompts.max()), int(outs.max())
    books.first_scheduled[idx] = t
    books.first_token[idx] = run.prefill_end_s
    books.finish[idx] = run.finish_s
    books.sample(t, run.prefill_end_s, 1, b, b * p_max, s, done, run.prefill_gpu_s)
    times = np.diff(np.concatenate([[run.prefill_end_s], run.step_ends_s]))
    j = np.arange(len(times))
    books.itl.add_many(times, b - np.searchsorted(np.sort(outs), j + 2, "left"))  # requests still generating
    start, prev = run.prefill_end_s, 0
    for o in np.unique(outs).tolist():
        if o - 1 > prev:
            stop = float(run.step_ends_s[o - 2])
            books.sample(start, stop, o - 1 - prev, b, b, s, done, float(run.step_gpu_s[prev : o - 1].sum()))
            start, prev = stop, o - 1
        done += int(np.sum(outs == o))
    for r in batch:
        s.release(r)
    s.generated[idx] = outs
    s.running = []
    books.stepped(run.wall_s, run.gpu_s, 0, o_max)
    books.token_s += run.token_s
    books.host_token_s += run.host_token_s
    books.computed += b * (p_max + o_max - 1)
    return run.end_s, done, o_max
