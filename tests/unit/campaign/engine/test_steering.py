"""Each link's cap from its optimizer (engine/steering.py): held to 1..max_active, asked
once a period, a change journalled with its reason and the slots given the cap."""
from __future__ import annotations

from gridxfer.campaign.accounting.stats import Accounting
from gridxfer.campaign.engine.slots import LinkSlots
from gridxfer.campaign.engine.steering import OPTIMIZER_PERIOD, Steering
from gridxfer.campaign.policy.optimizer import Decision
from gridxfer.campaign.spec.model import TierSpec


class Asks:
    """An optimizer that answers the next of ``answers`` and counts its calls."""

    def __init__(self, answers: list[int]) -> None:
        self.answers, self.calls, self.closed = list(answers), 0, False

    def update(self, now, link) -> Decision:
        self.calls += 1
        return Decision(self.answers.pop(0), f"asked {self.calls}")

    def close(self) -> None:
        self.closed = True


def setup(answers: list[int], max_active: int = 8):
    tiers = {"T1": TierSpec("T1", ("root://a//d/",), max_active=max_active)}
    opt = Asks(answers)
    steering = Steering(tiers, lambda t: opt)
    acct = Accounting({"T1": ("root://a//d/",)}, started=0.0, clock=lambda: 0.0)
    return steering, opt, acct, LinkSlots(tiers)


def test_a_cap_is_held_to_max_active_and_a_change_is_journalled():
    steering, opt, acct, slots = setup([1000, 0])
    events = steering.step(10.0, acct, slots)
    assert acct.cap("T1") == 8
    assert [kind for kind, _ in events] == ["optimizer"]
    assert events[0][1]["active"] == 8 and events[0][1]["reason"] == "asked 1"
    assert slots._gates["T1"]._limit == 8
    events = steering.step(10.0 + OPTIMIZER_PERIOD, acct, slots)
    assert acct.cap("T1") == 1 and events[0][1]["previous"] == 8   # 0 -> at least 1


def test_the_optimizer_is_asked_once_a_period_and_silence_when_nothing_changes():
    steering, opt, acct, slots = setup([4, 4, 4])
    assert steering.step(5.0, acct, slots)
    assert steering.step(5.0 + OPTIMIZER_PERIOD / 2, acct, slots) == [] and opt.calls == 1
    assert steering.step(5.0 + OPTIMIZER_PERIOD, acct, slots) == [] and opt.calls == 2


def test_close_closes_the_optimizers():
    steering, opt, _acct, _slots = setup([])
    steering.close()
    assert opt.closed


class AsksSooner(Asks):
    def update(self, now, link) -> Decision:
        self.calls += 1
        return Decision(4, "warming", ask_in=0.25 if self.calls < 3 else 5.0)


def test_an_optimizer_that_asks_sooner_is_asked_sooner_and_never_later_than_the_period():
    tiers = {"T1": TierSpec("T1", ("root://a//d/",), max_active=8)}
    opt = AsksSooner([])
    steering = Steering(tiers, lambda t: opt)
    acct = Accounting({"T1": ("root://a//d/",)}, started=0.0, clock=lambda: 0.0)
    slots = LinkSlots(tiers)
    steering.step(0.0, acct, slots)
    assert steering.due() == 0.25
    assert steering.step(0.2, acct, slots) == [] and opt.calls == 1
    steering.step(0.25, acct, slots)
    steering.step(0.5, acct, slots)
    assert opt.calls == 3 and steering.due() == 0.5 + OPTIMIZER_PERIOD     # 5 s: held to 1
