"""The PostOffice's addressing rules, as pure functions (no daemon, no loop)."""

from __future__ import annotations

from mailbus.postoffice.routing import group_of, name_conflict, resolve, send_targets

BOXES = {"robot.arm": "ARM", "robot.cam": "CAM", "solo": "SOLO", "robot.arm.out": "OUT"}
GROUPS = {"robot": {"robot.arm": "ARM", "robot.cam": "CAM"}, "robot.arm": {"robot.arm.out": "OUT"}}


def test_group_of_is_the_name_one_level_up() -> None:
    assert group_of("robot.arm") == "robot"
    assert group_of("robot.arm.out") == "robot.arm"
    assert group_of("solo") == ""


def test_a_mailbox_name_wins_over_the_group_of_that_name() -> None:
    assert resolve("robot.arm", BOXES, GROUPS) == ["ARM"]  # not its member robot.arm.out
    assert resolve("solo", BOXES, GROUPS) == ["SOLO"]


def test_a_group_name_reaches_every_member_one_level_down() -> None:
    assert resolve("robot", BOXES, GROUPS) == ["ARM", "CAM"]
    assert resolve("nobody", BOXES, GROUPS) == []
    assert resolve("robot.leg", BOXES, GROUPS) == []


def test_name_conflicts_keep_existing_addresses_meaning_the_same() -> None:
    groups: dict[str, dict[str, str]] = {"robot": {}}
    assert "exists" in name_conflict("robot.arm", BOXES, groups, set())
    assert "group" in name_conflict("robot", BOXES, groups, set())
    assert name_conflict("robot.cam.out", BOXES, groups, set()) == ""  # under a mailbox
    assert name_conflict("robotic", BOXES, groups, set()) == ""
    # Names being created count as existing, their group too, and their children wait.
    assert "exists" in name_conflict("new.box", {}, {}, {"new.box"})
    assert "group" in name_conflict("new", {}, {}, {"new.box"})
    assert "being created" in name_conflict("new.box.out", {}, {}, {"new.box"})


def test_a_response_to_members_goes_to_the_group_when_observed() -> None:
    def targets(recipients: list[str], response: bool, observe: bool = True) -> list[str]:
        return send_targets(
            recipients, "robot", (), is_response=response, observe_responses=observe
        )

    assert targets(["robot.arm", "robot.cam"], response=True) == ["robot"]
    assert targets(["robot.arm"], response=True, observe=False) == ["robot.arm"]
    assert targets(["robot.arm"], response=False) == ["robot.arm"]
    # An asker outside the group gets the answer in its own box only.
    assert targets(["robot.arm", "other.box"], response=True) == ["robot.arm", "other.box"]


def test_a_letter_without_recipients_goes_to_the_peers_or_the_group() -> None:
    common = {"is_response": False, "observe_responses": True}
    assert send_targets([], "robot", ("a.in", "b.in"), **common) == ["a.in", "b.in"]
    assert send_targets([], "robot", (), **common) == ["robot"]
    # Recipients are taken once each, in order.
    assert send_targets(["x.a", "x.b", "x.a"], "robot", (), **common) == ["x.a", "x.b"]
