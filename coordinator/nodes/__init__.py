"""Node identity: the public keys nodes are enrolled with, and the check that a node event causing action was
signed by the node it is about."""
