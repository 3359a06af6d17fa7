"""How the site's server processes start: gunicorn's settings and what each process loads first."""
