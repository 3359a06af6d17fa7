"""Entry point for `flask --app app` and gunicorn (`app:app`)."""

from semboard import create_app

app = create_app()
