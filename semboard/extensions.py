"""Flask extensions, created unbound here and bound to the app by create_app."""

from __future__ import annotations

from flask_babel import Babel
from flask_login import LoginManager
from flask_wtf.csrf import CSRFProtect

babel = Babel()
login_manager = LoginManager()
csrf = CSRFProtect()
