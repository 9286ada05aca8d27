"""When `myoloctl local up` may call the stack ready: one leader that every coordinator's group join follows."""

from myolo.coordinator.localstack.health import settled_leader


def _h(role: str, joined: int, granted: int | None) -> dict:
    return {"status": "ok", "role": role, "group_generation": joined, "term_generation": granted}


def test_one_leader_and_every_member_in_the_granting_generation_is_settled() -> None:
    assert settled_leader([_h("leader", 3, 3), _h("standby", 3, 3)])


def test_a_member_still_joining_is_not_settled() -> None:
    # the second coordinator has not joined yet: its join will rebalance the group and revoke leadership
    assert not settled_leader([_h("leader", 1, 1), _h("standby", -1, 1)])
    # it joined a newer generation that has not granted a term yet (the rebalance is under way)
    assert not settled_leader([_h("leader", 1, 1), _h("standby", 2, 1)])


def test_no_leader_or_two_leaders_is_not_settled() -> None:
    assert not settled_leader([_h("standby", 2, 2), _h("standby", 2, 2)])
    assert not settled_leader([_h("leader", 2, 2), _h("leader", 2, 2)])
    assert not settled_leader([])


def test_status_files_with_is_leader_are_read_alike() -> None:
    a = {"is_leader": True, "group_generation": 5, "term_generation": 5}
    b = {"is_leader": False, "group_generation": 5, "term_generation": 5}
    assert settled_leader([a, b])
