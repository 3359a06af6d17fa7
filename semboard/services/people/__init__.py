"""People: accounts, e-mail links, teams and their rules, grants, team windows, rate limits."""
