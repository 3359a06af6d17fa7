"""semboard: the participant command line (a thin client of the site's /api/v1)."""
