"""The federation's contract with its cells, for fleets past one coordinator (docs/scale.md).

Built so far: what crosses between a cell and the federation (a cell's summary up, the federation's intents
down) and the epoch fence both sides apply to it. The federation's own services are not built.
"""
