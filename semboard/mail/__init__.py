"""Mail: settings, delivery off the request, and the messages each event sends."""
