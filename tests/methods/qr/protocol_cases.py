"""Protocol cases of the qr family (tests/methods/test_protocol.py): every registered method, small budgets."""

from __future__ import annotations

from tests.methods.arena.protocol_cases import single_task_cases
from tests.methods.protocol import Case


def cases() -> dict[str, Case]:
    return single_task_cases("qr")
