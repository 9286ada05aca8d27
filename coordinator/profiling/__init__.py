"""A worker's profile turned into something to look at, on the operator's machine: ``myoloctl profile`` fetches
the folded stacks from the node's agent and hands them here. Not a component; no terminal, no cluster."""
