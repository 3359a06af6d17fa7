"""Flask extensions, created unbound here and bound to the app by create_app."""

from __future__ import annotations

from flask_login import LoginManager
from flask_wtf.csrf import CSRFProtect

login_manager = LoginManager()
csrf = CSRFProtect()
