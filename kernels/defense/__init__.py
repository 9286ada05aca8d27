"""The gradient-leakage defense of the data-parallel exchange: top-k sparsification with error feedback
(``compress``) and the exchange that sends only the kept coordinates (``exchange``). docs/defense.md."""
