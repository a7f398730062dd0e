"""Hidden cases for training: the meshes PROBLEMS.md names (2x4, 4x2, 1x8, 8x1, a 4- and a
3-device mesh), sizes that differ between meshes so that no hard-coded size survives, and learning
rates of several sizes.

allgather_matmul_grads: rings over Y of 4, 2, 8, 2, 3 devices and none (8x1: only dW's psum over
X); F never equal to D, so that a gathered dOut block cannot pass for one of A's; B/nX, D/nY and
F/nY all different from the visible case's.

fsdp_train_step(_jit): FSDP axes of 2, 4, 8, 3 devices and of one (1x8: nothing to send at all,
and nothing may cross Y); D and H multiples of nX, H not a multiple of D nor D of H everywhere, so
that neither weight's shard has the other's shape; lr large enough that a step nX times too long
is far off."""
from __future__ import annotations

from assignments.contract import Case, Part


def allgather_matmul_grads_cases(part: Part) -> list[Case]:
    """Rings over Y of every length the course uses, and sizes that differ per mesh."""
    return [
        part.visible_case,
        Case(mesh=(4, 2), sizes={"B": 12, "D": 10, "F": 6}),
        Case(mesh=(1, 8), sizes={"B": 6, "D": 24, "F": 40}),
        Case(mesh=(8, 1), sizes={"B": 16, "D": 12, "F": 20}),
        Case(mesh=(2, 2), sizes={"B": 10, "D": 14, "F": 8}),
        Case(mesh=(1, 3), sizes={"B": 5, "D": 9, "F": 15}),
    ]


def fsdp_train_step_cases(part: Part) -> list[Case]:
    """FSDP over X of 2, 4, 8 and 3 devices, and of one; sizes and learning rates per mesh."""
    return [
        part.visible_case,
        Case(mesh=(4, 2), sizes={"D": 12, "H": 40, "B": 12}, statics={"lr": 2.0}),
        Case(mesh=(8, 1), sizes={"D": 24, "H": 16, "B": 16}, statics={"lr": 3.0}),
        Case(mesh=(1, 8), sizes={"D": 10, "H": 14, "B": 6}, statics={"lr": 0.5}),
        Case(mesh=(3, 1), sizes={"D": 9, "H": 21, "B": 6}, statics={"lr": 1.5}),
        Case(mesh=(4, 1), sizes={"D": 20, "H": 12, "B": 8}, statics={"lr": 2.5}),
    ]


def fsdp_train_step_jit_cases(part: Part) -> list[Case]:
    """As fsdp_train_step's."""
    return fsdp_train_step_cases(part)


def cases(part: Part) -> list[Case]:
    if part.name == "fsdp_train_step_jit":
        return fsdp_train_step_jit_cases(part)
    if part.name == "fsdp_train_step":
        return fsdp_train_step_cases(part)
    if part.name == "allgather_matmul_grads":
        return allgather_matmul_grads_cases(part)
    raise KeyError(f"no hidden cases for {part.name!r}")
