"""Work off the request: one dispatch, post-commit hooks, and the jobs behind them."""
