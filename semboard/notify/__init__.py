"""Notifications: the event bus, task channels (webhooks, chat, mail) and unsubscribe links."""
