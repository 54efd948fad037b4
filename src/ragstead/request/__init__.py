"""The request model: what a search or an ask asks for (`model`), and the field table every door builds its
options from (`fields`). Light on purpose: the doors build a request before anything heavy loads."""
