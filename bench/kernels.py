"""Kernel launches of a compiled program and a lower bound of its step time on an H100.

`count_hlo` reads the optimized HLO text of a `jax.jit(f).lower(...).compile()` and counts the
instructions that launch work on a GPU (fusions, custom calls, dots, convolutions, reductions,
scatters, gathers, sorts, copies, collectives, unfused elementwise ops: every instruction that
is not a parameter, constant, tuple, get-tuple-element, bitcast or other bookkeeping), in the
entry computation and through the computations it calls: a while loop counts its body once per
trip (nested loops multiply), a conditional its largest branch. The trip count is XLA's
`known_trip_count`, else derived from the loop's recorded induction variable (`known_init_step`)
and the constant its condition compares it with; a loop with neither counts once and is
flagged. jax's random-bit loops (threefry rounds, rolled into a while loop by the CPU lowering,
unrolled and fused on a GPU: `bench.common.random_bits_loop`) count as one kernel.

This is a CPU-compiled proxy: XLA:CPU fuses less (or differently) than XLA:GPU, so the count
is not what a GPU launches, but a program that runs a loop of many small kernels (the launch-
bound programs a GPU is slow at) shows here as a large count.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import NamedTuple

from bench.common import random_bits_loop

# H100 SXM datasheet figures, for the lower bound of a step's time on one (`h100_bound`)
H100_PEAK_FLOPS = {"bfloat16": 989e12,  # dense bf16 tensor-core FLOP/s
                   "float32": 67e12}  # f32 FLOP/s (CUDA cores, no TF32)
H100_BANDWIDTH = 3.35e12  # HBM3 bytes/s
LAUNCH_S = 7e-6  # a typical kernel launch plus the gap before the next kernel starts, seconds

# opcodes that launch no kernel: bookkeeping, or control flow whose called computations count
FREE = frozenset({"parameter", "constant", "tuple", "get-tuple-element", "bitcast", "after-all",
                  "add-dependency", "opt-barrier", "domain", "partition-id", "replica-id",
                  "while", "conditional", "call"})
_HEADER = re.compile(r"^(ENTRY\s+)?%?([\w.\-]+)\s*\(.*\{\s*$")
_INSTRUCTION = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*(.*)$")
_OPCODE = re.compile(r"^([\w\-]+)\((.*?)\)")
_TRIP = re.compile(r'"known_trip_count":\{"n":"(-?\d+)"\}')
_INIT_STEP = re.compile(r'"known_init_step":\{"init":"(-?\d+)","step":"(-?\d+)"\}')
_INDUCTION = re.compile(r'"known_induction_variable":\{"tuple_index":"(\d+)"\}')
_FLIP = {"LT": "GT", "LE": "GE", "GT": "LT", "GE": "LE"}


class Instruction(NamedTuple):
    name: str
    opcode: str
    operands: tuple[str, ...]
    line: str

    def attribute(self, key: str) -> str | None:
        found = re.search(rf"\b{key}=%?([\w.\-]+)", self.line)
        return found and found.group(1)


class KernelCount(NamedTuple):
    """Kernels one call launches, and the while loops whose trip count is unknown (counted
    once: with any, `kernels` is a lower bound)."""

    kernels: int
    unknown_loops: int


def _skip_type(text: str) -> str:
    """`text` after its leading shape: "f32[8]{0} add(...)" or "(s32[], f32[8]) while(...)"."""
    if not text.startswith("("):
        return text.split(" ", 1)[1] if " " in text else ""
    depth = 0
    for index, char in enumerate(text):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth == 0:
            return text[index + 1:].lstrip()
    return ""


def parse_hlo(text: str) -> tuple[dict[str, dict[str, Instruction]], str]:
    """(computation name -> {instruction name -> Instruction}, entry computation's name)."""
    computations: dict[str, dict[str, Instruction]] = {}
    entry, current = "", None
    for line in text.splitlines():
        header = _HEADER.match(line)
        if header and not line[0].isspace():
            current = computations.setdefault(header.group(2), {})
            entry = header.group(2) if header.group(1) else entry
            continue
        if current is None:
            continue
        if line.startswith("}"):
            current = None
            continue
        instruction = _INSTRUCTION.match(line)
        opcode = instruction and _OPCODE.match(_skip_type(instruction.group(2)))
        if opcode:
            operands = tuple(re.findall(r"%([\w.\-]+)", opcode.group(2)))
            current[instruction.group(1)] = Instruction(instruction.group(1), opcode.group(1),
                                                        operands, line)
    if not entry:
        raise ValueError("count_hlo: no ENTRY computation in the HLO text")
    return computations, entry


def _scalar(computations: Mapping[str, Mapping[str, Instruction]], computation: str,
            name: str, index: int, arguments: Sequence | None = None) -> tuple | None:
    """What a scalar of a loop condition is: ("induction",) for element `index` of the loop
    state, ("constant", value), or None; followed through fusion parameters (`arguments`: the
    fusion's operands, resolved in the calling computation)."""
    instruction = computations[computation][name]
    if instruction.opcode == "constant":
        value = re.search(r"constant\((-?\d+)\)", instruction.line)
        return value and ("constant", int(value.group(1)))
    if instruction.opcode == "parameter" and arguments is not None:
        position = int(re.search(r"parameter\((\d+)\)", instruction.line).group(1))
        return arguments[position]
    if instruction.opcode == "get-tuple-element" and arguments is None:
        position = re.search(r"index=(\d+)", instruction.line)
        source = computations[computation][instruction.operands[0]]
        if source.opcode == "parameter" and position and int(position.group(1)) == index:
            return ("induction",)
    if instruction.opcode == "copy":
        return _scalar(computations, computation, instruction.operands[0], index, arguments)
    return None


def _compare(computations: Mapping[str, Mapping[str, Instruction]], computation: str,
             name: str, index: int, arguments: Sequence | None = None) -> tuple | None:
    """(direction, bound) of `induction direction bound`, the loop condition's root."""
    instruction = computations[computation][name]
    if instruction.opcode == "fusion":
        called = instruction.attribute("calls")
        inner = [_scalar(computations, computation, operand, index, arguments)
                 for operand in instruction.operands]
        root = next(i for i in computations[called].values() if i.line.lstrip()
                    .startswith("ROOT"))
        return _compare(computations, called, root.name, index, inner)
    direction = re.search(r"direction=(\w+)", instruction.line)
    if instruction.opcode != "compare" or not direction:
        return None
    left, right = (_scalar(computations, computation, operand, index, arguments)
                   for operand in instruction.operands)
    if left == ("induction",) and right and right[0] == "constant":
        return direction.group(1), right[1]
    if right == ("induction",) and left and left[0] == "constant":
        return _FLIP.get(direction.group(1)), left[1]
    return None


def trip_count(computations: Mapping[str, Mapping[str, Instruction]],
               loop: Instruction) -> int | None:
    """A while loop's trip count: XLA's known_trip_count, else from its induction variable's
    init and step and the constant bound of its condition; None if neither is recorded."""
    known = _TRIP.search(loop.line)
    if known:
        return int(known.group(1))
    init_step, induction = _INIT_STEP.search(loop.line), _INDUCTION.search(loop.line)
    condition = loop.attribute("condition")
    if not init_step or not induction or condition not in computations:
        return None
    root = next(i for i in computations[condition].values() if i.line.lstrip()
                .startswith("ROOT"))
    found = _compare(computations, condition, root.name, int(induction.group(1)))
    init, step = int(init_step.group(1)), int(init_step.group(2))
    if not found or step == 0:
        return None
    direction, bound = found
    if direction not in _FLIP or (direction in ("LT", "LE")) != (step > 0):
        return None
    gap = (bound - init) / step  # trips while init + k step stays on the bound's side
    trips = math.ceil(gap) if direction in ("LT", "GT") else math.floor(gap) + 1
    return max(0, trips)


def _count(computations: Mapping[str, Mapping[str, Instruction]],
           computation: str) -> Iterator[tuple[int, int]]:
    """(kernels, unknown loops) of each instruction of a computation, called ones included."""
    for instruction in computations[computation].values():
        if instruction.opcode == "while":
            if random_bits_loop(instruction.line):
                yield 1, 0
                continue
            trips = trip_count(computations, instruction)
            body = count_computation(computations, instruction.attribute("body"))
            if trips is None:
                cond = count_computation(computations, instruction.attribute("condition"))
                yield body.kernels + cond.kernels, 1 + body.unknown_loops + cond.unknown_loops
            else:
                yield trips * body.kernels, body.unknown_loops
        elif instruction.opcode == "conditional":
            branches = re.search(r"branch_computations=\{([^}]*)\}", instruction.line)
            names = (re.findall(r"%?([\w.\-]+)", branches.group(1)) if branches else
                     [instruction.attribute("true_computation"),
                      instruction.attribute("false_computation")])
            counts = [count_computation(computations, name) for name in names]
            yield max(c.kernels for c in counts), sum(c.unknown_loops for c in counts)
        elif instruction.opcode == "call":
            yield count_computation(computations, instruction.attribute("to_apply"))
        elif instruction.opcode not in FREE:
            yield 1, 0


def count_computation(computations: Mapping[str, Mapping[str, Instruction]],
                      computation: str) -> KernelCount:
    """The KernelCount of one computation of a parsed module (`parse_hlo`)."""
    counts = list(_count(computations, computation))
    return KernelCount(sum(k for k, _ in counts), sum(u for _, u in counts))


def count_hlo(text: str) -> KernelCount:
    """The KernelCount of one call of an optimized HLO module's entry computation."""
    computations, entry = parse_hlo(text)
    return count_computation(computations, entry)


def kernel_count(compiled) -> int:
    """Kernels one call of a compiled function launches (`count_hlo` of its optimized HLO)."""
    return count_hlo(compiled.as_text()).kernels


def bytes_accessed(compiled) -> float | None:
    """Bytes read and written by one call, from XLA's cost analysis (a loop body counts once:
    a lower bound with loops), or None where the backend gives none."""
    analysis = compiled.cost_analysis()
    if isinstance(analysis, Sequence):
        analysis = analysis[0] if analysis else {}
    value = (analysis or {}).get("bytes accessed")
    return None if value is None else float(value)


def h100_bound(flops: float, bytes_moved: float, kernels: int, dtype: str) -> tuple[float, str]:
    """(the least seconds a step takes on one H100 SXM, what bounds it): the largest of its
    FLOPs at the dtype's peak ("FLOPs"), its bytes at the memory bandwidth ("bytes") and its
    kernels at LAUNCH_S each ("launches")."""
    times = {"FLOPs": flops / H100_PEAK_FLOPS[dtype], "bytes": bytes_moved / H100_BANDWIDTH,
             "launches": kernels * LAUNCH_S}
    bound = max(times, key=times.get)
    return times[bound], bound
