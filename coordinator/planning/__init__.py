"""Planning a migration on the operator's machine: calculators, no cluster. Not a coordinator component (those
act on the fleet, as preflight does): ``myoloctl plan`` calls them and prints what they return."""
