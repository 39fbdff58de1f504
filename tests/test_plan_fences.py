"""``txnlog plan`` orders the fences with the aborts (txnlog.rules.plan.plan_steps, fence_steps; txnlog.ops.unblock.plan_script): a fence ends
its transactional.id's transaction on every partition the coordinator lists, and releases on each what the next
transaction still open there allows, as an abort does."""

from __future__ import annotations

from datetime import UTC, datetime

from txnlog.ops.commands import Run
from txnlog.ops.unblock import plan_script
from txnlog.rules.plan import fence_steps, plan_steps

HEALTH = [
    {"topic": "t", "partition": 0, "last_stable_offset": 100, "log_start_offset": 0, "log_end_offset": 500},
    {"topic": "t", "partition": 1, "last_stable_offset": 40, "log_start_offset": 0, "log_end_offset": 300},
    {"topic": "u", "partition": 0, "last_stable_offset": 10, "log_start_offset": 0, "log_end_offset": 50},
]
# cart-writer (LATE, FENCE) is open at 100 on t-0 and at 40 on t-1; a HANGING one at 200 on t-0 behind it;
# an active transaction at 250 on t-1 that nothing in the plan ends; u-0: an abort alone (the job's numbers).
FINDINGS = [
    {
        "topic": "t",
        "partition": p,
        "start_offset": s,
        "producer_id": 7,
        "producer_epoch": 2,
        "reason": r,
        "transactional_id": "cart-writer",
        "remedy": "FENCE",
        "source": "segments",
        "remedy_command": "kafka-transactions.sh --bootstrap-server <bootstrap> forceTerminateTransaction "
        "--transactionalId cart-writer",
    }
    for p, s, r in ((0, 100, "COORDINATOR_TIMEOUT_OVERDUE"), (1, 40, "COORDINATOR_TIMEOUT_OVERDUE"))
] + [{"topic": "t", "partition": 0, "start_offset": 100, "producer_id": 9, "producer_epoch": 0, "remedy": "ABORT"}]
ABORTS = [
    {"topic": "t", "partition": 0, "start_offset": 200, "producer_id": 8, "producer_epoch": 0, "safety": "SAFE",
     "reason": "COORDINATOR_COMPLETED", "lso_after_abort": 200, "offsets_released": 0, "command": "abort t-0"},
    {"topic": "u", "partition": 0, "start_offset": 10, "producer_id": 5, "producer_epoch": 0, "safety": "SAFE",
     "reason": "NO_TRANSACTIONAL_ID", "lso_after_abort": 50, "offsets_released": 40, "command": "abort u-0"},
]  # fmt: skip
OPEN = [
    {"topic": "t", "partition": 0, "producer_id": 7, "first_offset": 100},
    {"topic": "t", "partition": 0, "producer_id": 8, "first_offset": 200},
    {"topic": "t", "partition": 1, "producer_id": 7, "first_offset": 40},
    {"topic": "t", "partition": 1, "producer_id": 6, "first_offset": 250},
]


def _rows(steps):
    return [
        (
            s["remedy"],
            s["topic"],
            s["partition"],
            s["step"],
            s["lso_before"],
            s["lso_after_abort"],
            s["offsets_released"],
        )
        for s in steps
    ]


def test_fences_and_aborts_in_one_order_with_what_each_releases() -> None:
    fences = fence_steps(FINDINGS)
    assert [(f["topic"], f["partition"]) for f in fences] == [("t", 0), ("t", 1)]
    steps = plan_steps(ABORTS, HEALTH, fences, OPEN)
    assert _rows(steps) == [
        # t-0: the fence releases 100..200, then the abort behind it releases the rest to the log end
        ("FENCE", "t", 0, 1, 100, 200, 100),
        ("ABORT", "t", 0, 2, 200, 500, 300),
        # t-1: the fence releases up to the active transaction at 250, which nothing here ends
        ("FENCE", "t", 1, 1, 40, 250, 210),
        # u-0: no fence, the job's own numbers
        ("ABORT", "u", 0, 1, 10, 50, 40),
    ]


def test_script_fences_once_with_what_it_releases_on_each_partition() -> None:
    steps = plan_steps(ABORTS, HEALTH, fence_steps(FINDINGS), OPEN)
    run = Run("./out", "c1", datetime(2026, 1, 1, tzinfo=UTC))
    script = plan_script(steps, run, "k:9092").splitlines()
    calls = [line for line in script if line.startswith("txnlog ")]
    assert calls[0] == (
        'txnlog fence --bootstrap-server k:9092 --transactional-id cart-writer --producer-id 7 --producer-epoch 2 "$@"'
        "  # t-0: LSO 100 -> 200, 100 offsets released; t-1: LSO 40 -> 250, 210 offsets released"
    )
    assert calls[1].startswith("txnlog abort --bootstrap-servers k:9092 --topic t --partition 0 --start-offset 200")
    assert len(calls) == 3 and sum(c.startswith("txnlog fence") for c in calls) == 1
    assert any("sends the aborts and fences" in line for line in script)


def test_no_fence_keeps_the_plan_as_it_was() -> None:
    steps = plan_steps(ABORTS, HEALTH)
    assert _rows(steps) == [("ABORT", "u", 0, 1, 10, 50, 40), ("ABORT", "t", 0, 1, 100, 200, 0)]
    script = plan_script(steps, Run("./out", "c1", datetime(2026, 1, 1, tzinfo=UTC)), None)
    assert "fence" not in script
