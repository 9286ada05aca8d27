"""Assembling components by what they require and provide: checked from the declarations before anything is
built, refused with a message naming both components; a context hands out only the declared needs."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import pytest

from myolo.coordinator.commands.interface import CommandSender
from myolo.coordinator.components import COMPONENTS
from myolo.coordinator.core.assembly import AssemblyError, check_needs
from myolo.coordinator.core.component import Component
from myolo.coordinator.core.context import UndeclaredNeed
from myolo.coordinator.fleet.component import Fleet
from myolo.coordinator.fleet.interface import FleetNodes
from tests.support.coordinator.offline import offline_coordinator


@runtime_checkable
class Greeter(Protocol):
    def greet(self) -> str: ...


@runtime_checkable
class Counter(Protocol):
    def count(self) -> int: ...


class Giver(Component):
    name = "giver"
    provides = (Greeter,)

    def greet(self) -> str:
        return "hello"


class Taker(Component):
    name = "taker"
    requires = (Greeter,)

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.greeter = ctx.need(Greeter)


class Chicken(Component):
    name = "chicken"
    requires = (Counter,)
    provides = (Greeter,)

    def greet(self) -> str:
        return "cluck"


class Egg(Component):
    name = "egg"
    requires = (Greeter,)
    provides = (Counter,)

    def count(self) -> int:
        return 1


def test_every_real_component_is_provided_for_in_the_daemons_order() -> None:
    offered = check_needs(COMPONENTS)
    assert offered[FleetNodes] is Fleet
    for comp in COMPONENTS:
        for need in comp.requires:
            assert COMPONENTS.index(offered[need]) < COMPONENTS.index(comp)


def test_a_need_nobody_provides_is_refused_naming_the_component_and_the_interface() -> None:
    with pytest.raises(AssemblyError, match="taker requires Greeter, which no component provides"):
        check_needs((Taker,))


def test_a_need_provided_later_is_refused_naming_both_and_the_fix() -> None:
    with pytest.raises(AssemblyError, match="taker requires Greeter from giver, which is listed after it: list giver"):
        check_needs((Taker, Giver))


def test_a_circular_need_is_refused_naming_both() -> None:
    with pytest.raises(AssemblyError, match="circular need between chicken and egg") as exc:
        check_needs((Chicken, Egg))
    assert "chicken requires Counter from egg; egg requires Greeter from chicken" in str(exc.value)
    with pytest.raises(AssemblyError, match="circular need between egg and chicken"):
        check_needs((Egg, Chicken))


def test_a_component_lacking_what_it_provides_is_refused() -> None:
    class Liar(Component):
        name = "liar"
        provides = (Greeter,)

    with pytest.raises(AssemblyError, match="liar declares it provides Greeter but lacks greet"):
        check_needs((Liar,))


def test_two_providers_of_one_interface_are_refused() -> None:
    class Other(Giver):
        name = "other"

    with pytest.raises(AssemblyError, match="Greeter is provided by both giver and other"):
        check_needs((Giver, Other))


def test_the_coordinator_refuses_a_bad_order_before_building_anything(tmp_path) -> None:
    built: list[str] = []

    class Recorded(Taker):
        def __init__(self, ctx) -> None:
            built.append(ctx.component)
            super().__init__(ctx)

    with pytest.raises(AssemblyError, match="taker requires Greeter from giver"):
        offline_coordinator(tmp_path, components=(*COMPONENTS, Recorded, Giver))
    assert built == []


def test_a_component_gets_what_it_declares(tmp_path) -> None:
    coord = offline_coordinator(tmp_path, components=(*COMPONENTS, Giver, Taker))
    assert coord.get(Taker).greeter is coord.get(Giver)
    assert coord.get(Taker).greeter.greet() == "hello"


def test_asking_for_an_undeclared_need_is_an_error_naming_it(tmp_path) -> None:
    class Sneaky(Component):
        name = "sneaky"
        requires = (FleetNodes,)

        def __init__(self, ctx) -> None:
            super().__init__(ctx)
            self.fleet = ctx.need(FleetNodes)
            self.commands = ctx.need(CommandSender)  # provided by commands, but not declared here

    with pytest.raises(UndeclaredNeed, match="sneaky asks for CommandSender without declaring it"):
        offline_coordinator(tmp_path, components=(*COMPONENTS, Sneaky))
