"""Pick the program an op runs as, as a tuned library would.

`choose(op, chip)` compiles every candidate mapping of the op (archsim.compiler; a GEMM's
tilings from tilings.py), plays each on the engine (archsim.engine) and keeps the fastest,
counting its fixed costs (conditions.py: one kernel overhead per launched phase and the prologue
of a matrix-unit kernel), each at the clock its power holds (clock.py), as an autotuning library
picks the kernel that is fastest end to end. The first of equals wins. Times in seconds; the
choice is memoised by (op, chip): ops are frozen and compare by kind and shape. The memo keeps the
choices whose programs hold at most CHOICES_BYTES, the least recently used out first (a serving
run's long-prompt attention programs are megabytes each, and each op's timing is memoised above).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from archsim.choose import fidelity
from archsim.choose.clock import play_held
from archsim.choose.conditions import Condition, fixed_cost_s
from archsim.choose.tilings import cached_tilings, neighbours
from archsim.compiler.chip_family import SearchMove
from archsim.compiler.compile import compile_candidates
from archsim.compiler.families import family_rule
from archsim.compiler.gemm import best_raster, compile_gemm
from archsim.compiler.gemm_phases import GemmMapping, Tiling, mirrored
from archsim.engine.simulate import ProgramResult, play_program
from archsim.graph.ops import Op, OpKind
from archsim.hardware import Chip
from archsim.hardware.memory import hbm_latency_s
from archsim.memo import memo_bytes
from archsim.program import Phase, Program
from archsim.units import ceil_div


@dataclass(frozen=True, eq=False)
class Choice:
    """The program an op runs as, the clock its power held, how it played at that clock, and
    how many candidates it was chosen from; and how it played at the chip's clock (`unheld`:
    the same play where its power held no clock)."""

    program: Program
    played: ProgramResult
    candidates: int
    clock_hz: float
    unheld: ProgramResult

    @property
    def launches(self) -> int:
        """Kernels one run of the program launches."""
        return launches(self.program)


def launches(program: Program) -> int:
    """Kernels one run of `program` launches (phases that start a new kernel)."""
    return sum(1 for ph in program.phases if ph.new_kernel)


def program_time_s(program: Program, played: ProgramResult, chip: Chip, clock_hz: float | None = None) -> float:
    """One run of a played program back to back with others: its cycles at the clock it ran
    at (default the chip's) plus its fixed costs."""
    clock = clock_hz or chip.clock_hz
    return played.cycles / clock + fixed_cost_s(chip, launches(program), program.family, Condition.GRAPH, False)


def same_play(a: Program, b: Program) -> bool:
    """Whether two programs play, cost and draw power alike, so that neither need be played once
    the other is: the same phases (every entry array bit for bit, buffers, bytes in flight and
    launches), matrix units, family and actions. (Two tilings can compile to the same program:
    a 128 x 256 and a 256 x 128 tile of a square-typed GEMM move the same bytes per step.)"""
    if (a.matrix, a.family, a.activity, len(a.phases)) != (b.matrix, b.family, b.activity, len(b.phases)):
        return False
    return all(_same_phase(x, y) for x, y in zip(a.phases, b.phases, strict=True))


def _same_phase(x: Phase, y: Phase) -> bool:
    if (x.stages, x.inflight_bytes, x.warps, x.new_kernel, x.entries) != (
        y.stages,
        y.inflight_bytes,
        y.warps,
        y.new_kernel,
        y.entries,
    ):
        return False
    columns = ("core_start", "core_weight", "compute_cycles", "hbm_bytes", "l2_bytes")
    for name in (*columns, "store_bytes", "store_l2_bytes", "load_trips"):
        u, v = getattr(x, name), getattr(y, name)
        if u.dtype != v.dtype or u.shape != v.shape:
            return False
        if not np.array_equal(np.ascontiguousarray(u).view(np.uint8), np.ascontiguousarray(v).view(np.uint8)):
            return False  # bit for bit: -0.0 is not 0.0 here
    return True


def choose(op: Op, chip: Chip) -> Choice:
    """The fastest of the op's candidate programs on `chip` (fixed costs included), at the
    fidelity simulations run at (fidelity.py)."""
    return _choose(op, chip, fidelity.current())


CHOICES_BYTES = 32 << 20  # what the memo of choices may hold: their programs' arrays
CHOICE_OVERHEAD_BYTES = 4096  # a choice's records beside its arrays (about 2-4 kB each)


def choice_bytes(c: Choice) -> int:
    """Bytes a memoised choice holds: its program's entry arrays and a share for its records."""
    arrays = (
        ph.core_start.nbytes
        + ph.core_weight.nbytes
        + ph.hbm_bytes.nbytes
        + ph.l2_bytes.nbytes
        + ph.compute_cycles.nbytes
        + ph.store_bytes.nbytes
        + ph.store_l2_bytes.nbytes
        + ph.load_trips.nbytes
        for ph in c.program.phases
    )
    return CHOICE_OVERHEAD_BYTES + sum(arrays)


# a choice as `_choose` weighs it: (time, program, its play at the clock held, that clock, its
# play at the chip's clock)
_Best = tuple[float, Program, ProgramResult, float, ProgramResult]


@memo_bytes(CHOICES_BYTES, choice_bytes)
def _choose(op: Op, chip: Chip, at: fidelity.Fidelity) -> Choice:
    if op.kind.is_collective:
        raise ValueError(f"{op.kind.value} runs over the interconnect: time it with simulate_collective")
    screen = at is fidelity.Fidelity.SCREEN
    tilings = cached_tilings(op, chip) if op.kind is OpKind.GEMM else None
    if screen and tilings is not None:  # the compiler's ranking trusted: its first few only
        tilings = tilings[: fidelity.SCREEN_TILINGS]
    candidates = compile_candidates(op, chip, tilings)
    # every candidate at the chip's clock; then, fastest first, at the clock its power holds,
    # until the next one is slower even unthrottled (a lower clock never makes a kernel faster).
    # A candidate that plays as an earlier one (`same_play`) takes that one's play, and is not
    # held again: its time would equal the earlier one's, and the first of equals wins
    at_max: list[tuple[float, int, Program, ProgramResult, int]] = []
    for i, p in enumerate(candidates):
        twin = next((j for j in range(i) if same_play(candidates[j], p)), i)
        played = play_program(p, chip) if twin == i else at_max[twin][3]
        at_max.append((program_time_s(p, played, chip), i, p, played, twin))
    at_max.sort(key=lambda x: (x[0], x[1]))
    best: _Best | None = None
    for fast_s, i, program, played, twin in at_max:
        if best is not None and fast_s >= best[0]:
            break
        if twin != i:
            continue
        clock, held = play_held(program, chip, played, screen)
        total_s = program_time_s(program, held, chip, clock)
        if best is None or total_s < best[0]:
            best = (total_s, program, held, clock, played)
    assert best is not None, "every op compiles to at least one program"
    played_count = len(candidates)
    rule = family_rule(chip)
    if tilings is not None and not screen and rule.tries_half_the_cores():  # screen: the ranking trusted
        first = next(i for _s, i, p, _pl, _tw in at_max if p is best[1])
        best, dealt = _over_half_the_cores(op, chip, tilings[first], best)
        played_count += dealt
    moves = rule.search_moves()
    if tilings is not None and moves:
        best, searched = _tune(op, chip, moves, tilings, at_max, best, screen)
        played_count += searched
    return Choice(best[1], best[2], played_count, best[3], best[4])


def fills_one_wave(op: Op, chip: Chip, t: Tiling) -> bool:
    """Whether `t` deals the GEMM's data-parallel tiles to every core in one wave that half the
    cores could not run: more tiles than half the cores, no more than all. E.g. 4096 x 1024 x
    4096 in 256 x 256 tiles: 16 x 16 = 256 tiles; on 296 cores one wave (148 < 256 <= 296), on
    148 two, on 512 one that 256 cores would run as well."""
    tiles = op.groups * ceil_div(op.m, t.tm) * ceil_div(op.n, t.tn)
    return t.mapping is GemmMapping.DATA_PARALLEL and not t.grid and chip.cores < 2 * tiles <= 2 * chip.cores


def _over_half_the_cores(op: Op, chip: Chip, t: Tiling, best: _Best) -> tuple[_Best, int]:
    """The faster of `best` and its tiling `t` dealt over half the cores (`Tiling.grid`, under its
    best raster), where `t` fills one wave (`fills_one_wave`), and how many tilings that played (0
    or 1). The tiles of one wave start together, finish together and write every output at once;
    dealt over half the cores, the first wave's stores drain under the second's compute. A
    persistent kernel is launched with as many workgroups as its autotuner finds fastest, fewer
    than the cores where that is (Tensile's Stream-K dynamic mode runs large problems "at
    slightly reduced CU count if it improves work division", ROCm 6.2 release notes). The
    dealt tiling is held at its power's clock only where it is faster unheld than the best; it
    is tried at full fidelity only."""
    if not fills_one_wave(op, chip, t):
        return best, 0
    half = best_raster(op, chip, replace(t, grid=chip.cores // 2))[0]
    program = compile_gemm(op, chip, half)
    at_max = play_program(program, chip)
    if program_time_s(program, at_max, chip) >= best[0]:
        return best, 1
    clock, held = play_held(program, chip, at_max)
    total_s = program_time_s(program, held, chip, clock)
    return ((total_s, program, held, clock, at_max) if total_s < best[0] else best), 1


SEARCH_MOVES = 4  # moves a tiling search makes from its start at most
# searches after the shortlist's, each from the fastest tiling played that none stood on: a search
# stops where no neighbour beats the best, though one as fast may lead on to a faster tiling
SEARCH_RESTARTS = 2


def _tune(
    op: Op,
    chip: Chip,
    moves: frozenset[SearchMove],
    tilings: list[Tiling],
    at_max: list[tuple[float, int, Program, ProgramResult, int]],
    best: _Best,
    screen: bool,
) -> tuple[_Best, int]:
    """The fastest tiling yet after the searches a compiler that compiles for one chip tunes a
    GEMM's tiling with (`moves`: `FamilyRule.search_moves`), and how many tilings they played:
    from each shortlisted tiling (`tilings`, played as `at_max`: time, index, program, play, the
    index of the one it plays as), the fastest first; then SEARCH_RESTARTS times from the
    fastest played that no search stood on; then from the fastest of each deal (the cores its
    items are dealt over, `Tiling.grid`; those the searches reach included, the fastest deal
    first) that none stood on, where the deal could beat the best (`deal_floor_s`)."""
    first = next(i for _s, i, p, _pl, _tw in at_max if p is best[1])
    starts = [tilings[first]] + [tilings[i] for _s, i, _p, _pl, twin in at_max if twin == i and i != first]
    # a shortlisted tiling that plays as one before it (`same_play`) is not searched from
    twins = {_move_key(tilings[i]) for _s, i, _p, _pl, twin in at_max if twin != i}
    times = {_move_key(tilings[i]): (fast_s, tilings[i]) for fast_s, i, *_ in at_max}
    played = _Played(times, twins, mirrored(op))
    count = 0
    for start in starts:
        best, searched = _search(op, chip, moves, played, start, best, screen)
        count += searched
    for _ in range(SEARCH_RESTARTS):
        restart = played.fastest_unsearched()
        if restart is None:
            break
        best, searched = _search(op, chip, moves, played, restart, best, screen)
        count += searched
    done: set[int] = set()
    while fresh := [g for g in played.deals() if g not in done]:
        done.add(fresh[0])
        restart = played.fastest_unsearched(fresh[0])
        if restart is not None and deal_floor_s(op, chip, fresh[0]) < best[0]:
            best, searched = _search(op, chip, moves, played, restart, best, screen)
            count += searched
    return best, count


@dataclass
class _Played:
    """The tilings a GEMM's search has played: each's time at the chip's clock (unheld), by
    `_move_key`, in the order played; the keys of those a search stood on (`_search`); and
    whether the GEMM is square of one operand type (`mirrored`), where a tiling and its
    transpose play alike (`same_play`) and a search from one is the other's mirrored."""

    times: dict[tuple, tuple[float, Tiling]]
    searched: set[tuple]
    mirrored: bool = False

    def stand_on(self, t: Tiling) -> None:
        """Mark `t` searched from, and its transpose where the GEMM is `mirrored`."""
        self.searched.add(_move_key(t))
        if self.mirrored:
            self.searched.add(_move_key(replace(t, tm=t.tn, tn=t.tm)))

    def deals(self) -> list[int]:
        """The core counts played (`Tiling.grid`), the fastest's first."""
        order = sorted(self.times.values(), key=lambda x: x[0])
        return list(dict.fromkeys(t.grid for _s, t in order))

    def fastest_unsearched(self, grid: int | None = None) -> Tiling | None:
        """The fastest tiling played (unheld; the first played of equals) that no search stood
        on, of those dealt over `grid` cores where given, or None where every one was."""
        rest = [(s, t) for key, (s, t) in self.times.items() if key not in self.searched and grid in (None, t.grid)]
        return min(rest, key=lambda x: x[0])[1] if rest else None


def deal_floor_s(op: Op, chip: Chip, grid: int) -> float:
    """The least time the GEMM can take dealt over `grid` of the chip's cores (0: every core):
    its FLOPs at those cores' peak, or its compulsory bytes at what they can keep coming from main
    memory (its peak bandwidth, or by Little's law the bytes those cores keep in flight over its
    access latency), whichever is longer; a deal whose floor is no faster than the best is not
    searched. E.g. 4096 x 1024 x 4096 bf16 (34.4 GFLOP, 50.3 MB) on 2 of 16 cores of 64 TFLOP/s
    and 1 MiB in flight each, 500 ns from a 1 TB/s memory: 34.4e9 / 8e12 = 4.3 ms against
    50.3 MB / min(1 TB/s, 2 x 1 MiB / 500 ns = 4.2 TB/s) = 50 us: 4.3 ms."""
    share = (grid or chip.cores) / chip.cores
    inflight = share * chip.cores * chip.core.max_inflight_bytes / hbm_latency_s(chip)
    feed = min(chip.hbm.peak_bandwidth_bytes_per_s, inflight)
    return max(op.flops() / (chip.peak_flops(op.dtype) * share), op.min_bytes() / feed)


def _search(
    op: Op, chip: Chip, moves: frozenset[SearchMove], played: _Played, start: Tiling, best: _Best, screen: bool
) -> tuple[_Best, int]:
    """The fastest tiling yet (`best`) after a search from `start`, one of the shortlist or a
    tiling played (`SEARCH_RESTARTS`), as a compiler that compiles for one chip tunes it
    (`moves`: `FamilyRule.search_moves`); and how many tilings it played. Every neighbour of
    the tiling it stands on (`tilings.neighbours`) not yet played (`played`, by `_move_key`,
    to which it adds each it plays and each it stands on) is played, held at the clock its power
    allows where it is faster unheld than the best (a lower clock never makes a kernel faster),
    and the search moves to the fastest of them where it beats the best, at most SEARCH_MOVES
    times. The compiler searches from each shortlisted tiling in turn, the fastest first: a
    search from one alone stops in the first basin, and the estimate that ranked them leaves
    out what the engine plays apart."""
    count = 0
    current = start
    for _ in range(SEARCH_MOVES):
        played.stand_on(current)
        moved_to = None
        downhill: tuple[float, Tiling] | None = None  # the fastest new neighbour, unheld
        for n in neighbours(op, chip, current, moves):
            if _move_key(n) in played.times:
                continue
            program = compile_gemm(op, chip, n)
            at_max = play_program(program, chip)
            count += 1
            fast_s = program_time_s(program, at_max, chip)
            played.times[_move_key(n)] = (fast_s, n)
            if downhill is None or fast_s < downhill[0]:
                downhill = (fast_s, n)
            if fast_s >= best[0]:
                continue
            clock, held = play_held(program, chip, at_max, screen)
            total_s = program_time_s(program, held, chip, clock)
            if total_s < best[0]:
                best, moved_to = (total_s, program, held, clock, at_max), n
        if moved_to is None and downhill is not None and downhill[0] < played.times[_move_key(current)][0]:
            moved_to = downhill[1]  # none beats the best: on down the slope it stands on
        if moved_to is None:
            break
        current = moved_to
    return best, count


def _move_key(t: Tiling) -> tuple:
    """What makes two tilings the same point of a search: tile, K step, mapping, slices and the
    cores dealt over (each is played under its best raster)."""
    return (t.tm, t.tn, t.tk, t.mapping, t.split, t.grid)
