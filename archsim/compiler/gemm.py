"""Tiling and mapping of GEMMs: output tiles that fit double-buffered in SRAM, dealt to cores in
waves, split along K when there are too few tiles to fill the cores, with L2 reuse per wave.

The tile shape is chosen as an autotuning kernel library would: every legal (tm, tn, tk, split)
is costed with a quick analytic estimate (compute per wave, HBM traffic after L2 reuse, the
per-core Little's-law bandwidth) and the cheapest is compiled into a Program.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from archsim.compiler.program import Phase, Program, build_phase
from archsim.compiler.tiles import matmul_cycles, step_cycles, vector_step_cycles
from archsim.graph.ops import Op
from archsim.hardware import Chip
from archsim.hardware.chip import MIN_K_STEP, MIN_TILE_EDGE
from archsim.hardware.memory import hbm_latency_s, l2_bandwidth, l2_latency_s
from archsim.units import ceil_div

# tile edges and K steps a kernel library offers (powers of two from the smallest the hardware takes)
TILE_SIZES = tuple(MIN_TILE_EDGE << i for i in range(7))  # 8 .. 512
K_STEPS = tuple(MIN_K_STEP << i for i in range(5))  # 32 .. 512
SPLITS = (1, 2, 3, 4, 6, 8, 12, 16)
PARTIAL_BYTES = 4  # split-K partial sums are fp32
STREAM_K = 0  # `split` value of the stream-K mapping: data-parallel full waves, the rest split evenly


def _stage_bytes(tm, tn, tk, a: float, b: float):
    return tm * tk * a + tk * tn * b


def candidate_tilings(op: Op, chip: Chip, count: int = 4) -> list[tuple[int, int, int, int]]:
    """The `count` most promising (tm, tn, tk, split) for the GEMM on the chip, best first.

    Each legal tiling is costed analytically (compute per wave, L2 traffic, the per-core
    Little's-law bandwidth), ties going to less HBM traffic after L2 reuse and then to less
    compute. The engine then plays the shortlist and keeps the fastest, as an autotuning kernel
    library does. The ranking leaves HBM bandwidth out, so a faster memory never changes which
    tilings are tried (and so never makes the best of them slower).
    """
    m, k, n = op.m, op.k, op.n
    a, b = op.dtype.bytes, op.b_dtype.bytes
    core = chip.core
    # power-of-two edges, and the whole dimension (one tile) where the SRAM can hold it
    tms = sorted({t for t in TILE_SIZES if t < 2 * m} | {m})
    tns = sorted({t for t in TILE_SIZES if t < 2 * n} | {n})
    tks = sorted({t for t in K_STEPS if t < 2 * k} | {k})
    grid = np.array(list(itertools.product(tms, tns, tks)), dtype=np.int64)
    tm, tn, tk = grid[:, 0], grid[:, 1], grid[:, 2]
    stage = _stage_bytes(tm, tn, tk, a, b)
    ok = (2 * stage <= core.sram.capacity_bytes) & (tm * tn * PARTIAL_BYTES <= core.accumulator_bytes)
    if not ok.any():
        ok = stage == stage.min()
    tm, tn, tk, stage = tm[ok], tn[ok], tk[ok], stage[ok]
    em, en = np.minimum(tm, m), np.minimum(tn, n)
    cycles_per_step = matmul_cycles(core, em, np.minimum(tk, k), en, op.dtype, op.b_dtype)
    tiles = op.groups * -(-m // tm) * -(-n // tn)
    ksteps = -(-k // tk)
    stages = np.maximum(1, core.sram.capacity_bytes // stage)
    lat = hbm_latency_s(chip)
    rate = np.minimum(core.max_inflight_bytes, (stages - 1).clip(1) * stage) / lat
    operands = op.groups * (m * k * a + k * n * b)
    fits = operands <= chip.l2.capacity_bytes
    scored = []
    for split in (STREAM_K,) + SPLITS:
        if split > 1 and (tiles >= chip.cores).all():
            break
        if split == STREAM_K:  # iterations spread evenly over the cores
            per_item, items = ksteps, tiles
            waves = (tiles * ksteps / chip.cores) / ksteps
        else:
            per_item = -(-ksteps // split)
            items = tiles * split
            waves = -(-items // chip.cores)
        compute_s = waves * per_item * cycles_per_step / chip.clock_hz
        rows_per_wave = np.maximum(1, chip.cores // np.maximum(1, -(-n // tn)))
        b_passes = np.where(fits, 1, ceil_div(ceil_div(m, tm), rows_per_wave))
        hbm = op.groups * (m * k * a + b_passes * k * n * b) + op.groups * m * n * op.c_dtype.bytes
        if split > 1:
            hbm = hbm + 2 * split * op.groups * m * n * PARTIAL_BYTES
        item_bytes = per_item * stage
        core_s = waves * (item_bytes / rate + lat)
        if split == STREAM_K:  # the core finishing a split tile reads the others' partials from L2
            shared = tiles % chip.cores
            sharers = np.ceil(chip.cores / np.maximum(1, shared)) * (shared > 0)
            partials = np.maximum(0, sharers - 1) * em * en * PARTIAL_BYTES
            core_s = core_s + partials * l2_latency_s(chip) / core.max_inflight_bytes
        l2_s = items * item_bytes / l2_bandwidth(chip)
        est = np.maximum(compute_s, np.maximum(core_s, l2_s))
        if split > 1:  # the reduction kernel writes and reads every partial once more
            est = est + chip.overheads.kernel_s + 2 * split * op.groups * m * n * PARTIAL_BYTES / (chip.cores * rate)
        est = np.where(split <= ksteps, est, np.inf)
        if split == STREAM_K:
            est = np.where(tiles % chip.cores != 0, est, np.inf)  # no partial wave: plain tiling
        hbm = np.broadcast_to(hbm, est.shape)
        for i in np.lexsort((compute_s, hbm, est))[:count]:
            if np.isfinite(est[i]):
                scored.append(
                    (float(est[i]), float(hbm[i]), float(compute_s[i]), (int(tm[i]), int(tn[i]), int(tk[i]), split))
                )
    scored.sort()
    # one K step per tile shape and split: the shortlist spans different mappings
    out: dict[tuple[int, int, int], tuple[int, int, int, int]] = {}
    for *_cost, (tm_, tn_, tk_, split_) in scored:
        out.setdefault((tm_, tn_, split_), (tm_, tn_, tk_, split_))
    return list(out.values())[:count]


def compile_gemm(op: Op, chip: Chip, tiling: tuple[int, int, int, int]) -> Program:
    """Compile a GEMM (or `groups` equal GEMMs) with `tiling` = (tm, tn, tk, split) into the GEMM
    phase and, if split along K, the reduction kernel."""
    tm, tn, tk, split = tiling
    if split == STREAM_K:
        phases = _stream_k_phases(op, chip, tm, tn, tk)
    else:
        phases = [_gemm_phase(op, chip, tm, tn, tk, split)]
        if split > 1:
            phases.append(_reduce_phase(op, chip, split))
    return Program(tuple(phases), op.flops(), op.min_bytes(), matrix=True)


def _items(op: Op, tm: int, tn: int, tk: int, split: int) -> dict[str, np.ndarray]:
    """Work items in launch order, as arrays: group, row block, column block and K slice
    (g, i, j, s) with the item's rows, columns and K length (em, en, kl)."""
    m, k, n = op.m, op.k, op.n
    per = ceil_div(ceil_div(k, tk), split) * tk
    g, i, j, s = (
        x.ravel()
        for x in np.meshgrid(
            np.arange(op.groups), np.arange(-(-m // tm)), np.arange(-(-n // tn)), np.arange(split), indexing="ij"
        )
    )
    kl = np.minimum(k, (s + 1) * per) - s * per
    keep = kl > 0
    g, i, j, s, kl = g[keep], i[keep], j[keep], s[keep], kl[keep]
    return {
        "g": g,
        "i": i,
        "j": j,
        "s": s,
        "em": np.minimum(tm, m - i * tm),
        "en": np.minimum(tn, n - j * tn),
        "kl": kl,
    }


def _wave_hbm_fractions(items: dict[str, np.ndarray], cores: int, a: float, b: float, fits_l2: bool) -> np.ndarray:
    """Share of each wave's operand bytes that misses L2: the first touch of each A row block
    and B column block (per K slice) comes from HBM, the others hit. When all operands fit in
    L2, blocks fetched by an earlier wave stay resident."""
    count = len(items["kl"])
    wave = np.arange(count) // cores
    waves = int(wave[-1]) + 1 if count else 0
    a_bytes = items["em"] * a * items["kl"]
    b_bytes = items["en"] * b * items["kl"]
    total = np.bincount(wave, a_bytes + b_bytes, minlength=waves)
    unique = np.zeros(waves)
    slices = int(items["s"].max()) + 1 if count else 1
    for block, nbytes in ((items["i"], a_bytes), (items["j"], b_bytes)):
        key = (items["g"] * (int(block.max()) + 1 if count else 1) + block) * slices + items["s"]
        if not fits_l2:
            key = key + wave * (int(key.max()) + 1)
        _, first = np.unique(key, return_index=True)
        unique += np.bincount(wave[first], nbytes[first], minlength=waves)
    return np.divide(unique, total, out=np.zeros(waves), where=total > 0)


def _gemm_phase(op: Op, chip: Chip, tm: int, tn: int, tk: int, split: int, limit_items: int | None = None) -> Phase:
    a, b = op.dtype.bytes, op.b_dtype.bytes
    items = {key: v[:limit_items] for key, v in _items(op, tm, tn, tk, split).items()}
    cores = chip.cores
    fits = op.groups * (op.m * op.k * a + op.k * op.n * b) <= chip.l2.capacity_bytes
    wave_frac = _wave_hbm_fractions(items, cores, a, b, fits)
    fracs, frac_id = np.unique(wave_frac, return_inverse=True)
    frac_id = frac_id[np.arange(len(items["kl"])) // cores]
    out_bytes = PARTIAL_BYTES if split > 1 else op.c_dtype.bytes
    partials_in_l2 = split > 1 and _partials_fit(op, chip, split)
    # items of the same shape and miss fraction have the same entries: build each kind once
    em_, en_, kl_ = items["em"], items["en"], items["kl"]
    code = ((em_ * (int(en_.max()) + 1) + en_) * (int(kl_.max()) + 1) + kl_) * len(fracs) + frac_id
    _codes, first, kind_of = np.unique(code, return_index=True, return_inverse=True)
    blocks = []
    for idx in first:
        em, en, kl, f = int(em_[idx]), int(en_[idx]), int(kl_[idx]), float(fracs[frac_id[idx]])
        ks = np.full(-(-kl // tk), tk, dtype=np.int64)
        ks[-1] = kl - tk * (len(ks) - 1)
        moved = ks * (em * a + en * b)
        seq = np.zeros((len(ks), 5))
        seq[:, 0] = moved * f
        seq[:, 1] = moved * (1.0 - f)
        seq[:, 2] = step_cycles(chip.core, em, tk, en, op.dtype, op.b_dtype)
        seq[-1, 2] = step_cycles(chip.core, em, int(ks[-1]), en, op.dtype, op.b_dtype)
        seq[-1, 4 if partials_in_l2 else 3] = em * en * out_bytes
        blocks.append(seq)
    # core c runs items c, c + cores, ...: cores with the same kinds in the same order are one sequence
    groups: dict[bytes, list] = {}
    for c in range(min(cores, len(kind_of))):
        sig = np.ascontiguousarray(kind_of[c::cores])
        entry = groups.setdefault(sig.tobytes(), [sig, 0])
        entry[1] += 1
    sequences = [np.concatenate([blocks[k] for k in sig]) for sig, _w in groups.values()]
    weights = [w for _sig, w in groups.values()]
    stages = chip.core.sram.capacity_bytes // _stage_bytes(tm, tn, tk, a, b)
    return build_phase(sequences, stages, f"gemm {tm}x{tn}x{tk} split{split}", weights=weights)


def _partials_fit(op: Op, chip: Chip, split: int) -> bool:
    """Whether the fp32 partial sums of a split-K GEMM stay in L2 until they are reduced."""
    return split * op.groups * op.m * op.n * PARTIAL_BYTES <= chip.l2.capacity_bytes // 2


def _reduce_phase(op: Op, chip: Chip, split: int) -> Phase:
    """Sum the fp32 partials of a split-K GEMM and write the output (its own kernel); the
    partials are read from L2 when they fit there."""
    elements = op.groups * op.m * op.n
    return streaming_phase(
        chip,
        elements,
        read_bytes_per_element=split * PARTIAL_BYTES,
        write_bytes_per_element=op.c_dtype.bytes,
        lane_ops_per_element=split,
        special_ops_per_element=0,
        label=f"split-K reduce x{split}",
        reads_hit_l2=_partials_fit(op, chip, split),
    )


def _stream_k_phases(op: Op, chip: Chip, tm: int, tn: int, tk: int) -> list[Phase]:
    """Stream-K (Osama et al., PPoPP 2023), hybrid form: all but the last full wave of output
    tiles run data-parallel; the remaining tiles' K iterations are divided evenly between the
    cores, so no core idles in a partial last wave. A core that ends inside a tile writes its
    fp32 partial to L2; the core that finishes the tile reads the others' partials back."""
    a, b = op.dtype.bytes, op.b_dtype.bytes
    cores = chip.cores
    tiles_m, tiles_n = -(-op.m // tm), -(-op.n // tn)
    tiles = op.groups * tiles_m * tiles_n
    dp_tiles = max(0, tiles // cores - 1) * cores
    phases = []
    if dp_tiles:
        phases.append(_gemm_phase(op, chip, tm, tn, tk, 1, limit_items=dp_tiles))
    ksteps = -(-op.k // tk)
    sk_iters = (tiles - dp_tiles) * ksteps
    per = -(-sk_iters // cores)
    items = _items(op, tm, tn, tk, 1)
    tail = {key: v[dp_tiles:] for key, v in items.items()}
    # the tail's tiles are in flight together: the first touch of each operand block misses
    frac = float(_wave_hbm_fractions(tail, len(tail["kl"]), a, b, False)[0])
    memo: dict[tuple, int] = {}

    def cycles_of(em: int, kk: int, en: int) -> int:
        if (em, kk, en) not in memo:
            memo[em, kk, en] = step_cycles(chip.core, em, kk, en, op.dtype, op.b_dtype)
        return memo[em, kk, en]

    sequences = []
    for c in range(cores):
        lo, hi = c * per, min(sk_iters, (c + 1) * per)
        rows = []
        i = lo
        while i < hi:
            t, s0 = divmod(i, ksteps)
            s1 = min(ksteps, s0 + (hi - i))
            em, en = int(tail["em"][t]), int(tail["en"][t])
            ks = np.full(s1 - s0, tk, dtype=np.int64)
            if s1 == ksteps:
                ks[-1] = op.k - tk * (ksteps - 1)
            moved = ks * (em * a + en * b)
            seg = np.zeros((len(ks), 5))
            seg[:, 0] = moved * frac
            seg[:, 1] = moved * (1.0 - frac)
            seg[:, 2] = cycles_of(em, tk, en)
            seg[-1, 2] = cycles_of(em, int(ks[-1]), en)
            if s1 == ksteps:  # this core finishes the tile: fold in the others' partials, write C
                others = _segments_before(dp_tiles, t, s0, ksteps, per) if s0 > 0 else 0
                seg[-1, 1] += others * em * en * PARTIAL_BYTES
                seg[-1, 3] = em * en * op.c_dtype.bytes
            else:
                seg[-1, 4] = em * en * PARTIAL_BYTES
            rows.append(seg)
            i += s1 - s0
        if rows:
            sequences.append(np.concatenate(rows))
    stages = chip.core.sram.capacity_bytes // _stage_bytes(tm, tn, tk, a, b)
    phases.append(build_phase(sequences, stages, f"stream-K {tm}x{tn}x{tk}", new_kernel=not phases))
    return phases


def _segments_before(dp_tiles: int, tile: int, s0: int, ksteps: int, per: int) -> int:
    """How many cores worked on iterations [0, s0) of the tile (each holds `per` iterations)."""
    first = tile * ksteps
    return len({(first + s) // per for s in range(s0)})


MIN_CHUNK_BYTES = 16 * 1024  # smallest slice of a streaming op one core takes (one thread block's worth)


def streaming_phase(
    chip: Chip,
    elements: int,
    read_bytes_per_element: float,
    write_bytes_per_element: float,
    lane_ops_per_element: float,
    special_ops_per_element: float,
    label: str,
    row_elements: int = 1,
    reads_hit_l2: bool = False,
    l2_rereads_per_element: float = 0.0,
    row_inflight_bytes: float = 0.0,
    inflight_bytes: float = float("inf"),
    min_chunk_bytes: float = MIN_CHUNK_BYTES,
    writes_hit_l2: bool = False,
) -> Phase:
    """A streaming (vector / copy) kernel over `elements`, cut into chunks dealt to cores.

    Chunks hold whole rows of `row_elements` (a row-wise op keeps a row on one core), at least
    `min_chunk_bytes` of input (a thread block's worth), and are spread so every core gets work
    when there is enough. `reads_hit_l2` and `writes_hit_l2` put the stream in L2 rather than
    HBM; `l2_rereads_per_element` bytes are read again from L2 (later passes over a row).
    `inflight_bytes` bounds a core's bytes in flight below the DMA's own limit; a row-wise kernel
    (`row_inflight_bytes` > 0) keeps that many per row it works on and does not load ahead of
    its compute.
    """
    cores = chip.cores
    per_el = max(read_bytes_per_element, 1e-9)
    rows = max(1, elements // row_elements)
    # a row-wise kernel gives each row a thread block of its own
    min_rows = 1 if row_inflight_bytes > 0 else max(1, math.ceil(min_chunk_bytes / (per_el * row_elements)))
    rows_per_chunk = max(min_rows, math.ceil(rows / cores))
    # a chunk larger than a quarter of SRAM is streamed in several entries
    max_rows = max(1, int(chip.core.sram.capacity_bytes // 4 // (per_el * row_elements)))
    # rows_per_chunk >= rows / cores, so each core takes at most one chunk: all chunks are alike
    # but the last, and cores with alike chunks run one weighted sequence
    chunks = math.ceil(rows / rows_per_chunk)
    last_rows = rows - (chunks - 1) * rows_per_chunk
    if row_inflight_bytes > 0:
        inflight_bytes = min(inflight_bytes, rows_per_chunk * row_inflight_bytes)
    elif inflight_bytes < chip.core.max_inflight_bytes:
        # a kernel that keeps few bytes in flight runs many small blocks per core, whose loads
        # overlap the others' compute: entries of about its bytes in flight
        max_rows = min(max_rows, max(min_rows, int(inflight_bytes // (per_el * row_elements))))

    def chunk_entries(chunk_rows: int) -> np.ndarray:
        sizes = np.full(-(-chunk_rows // max_rows), max_rows, dtype=np.int64)
        sizes[-1] = chunk_rows - max_rows * (len(sizes) - 1)
        out = np.zeros((len(sizes), 5))
        e = sizes * row_elements
        out[:, 1 if reads_hit_l2 else 0] = e * read_bytes_per_element
        out[:, 1] += e * l2_rereads_per_element
        for size in np.unique(sizes):
            n = int(size) * row_elements
            out[sizes == size, 2] = vector_step_cycles(chip.core, n * lane_ops_per_element, n * special_ops_per_element)
        out[:, 4 if writes_hit_l2 else 3] = e * write_bytes_per_element
        return out

    sequences, weights = [chunk_entries(rows_per_chunk)], [chunks - 1]
    if last_rows == rows_per_chunk:
        weights[0] += 1
    else:
        sequences.append(chunk_entries(last_rows))
        weights.append(1)
    if weights[0] == 0:
        sequences, weights = sequences[1:], weights[1:]
    stages = max(2, chip.core.sram.capacity_bytes // max(1, int(max_rows * row_elements * per_el)))
    if row_inflight_bytes > 0:
        stages = 1  # a row's block loads, reduces and writes its row in turn: no loads run ahead
    return build_phase(sequences, stages, label, weights=weights, inflight_bytes=inflight_bytes)
